// The newcomer's path: `locus serve` with no model argument serves the trained demo model
// (models/demo) as "demo", and the official OpenAI client gets, at temperature 0, exactly the
// greedy continuations PyTorch computed from the same weights when the model was trained
// (models/demo/reference.json), through /v1/completions and /v1/chat/completions: the same
// token ids (vLLM's return_tokens_as_token_ids), the same text and finish reason.
//
//   node tests/e2e/demo_e2e.mjs --locus build/cpu/locus --demo models/demo
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { assert, assertEq, Checks, demoExpected as expected, launchServer, parseArgs, stopServer }
  from './harness.mjs';

const args = parseArgs(process.argv, ['locus', 'demo']);
const reference = JSON.parse(fs.readFileSync(path.join(args.demo, 'reference.json'), 'utf8'));
const server = await launchServer(args.locus, []);
const client = new OpenAI({ apiKey: 'none', baseURL: `${server.baseUrl}/v1`, maxRetries: 0 });
const checks = new Checks();


// "token_id:123" -> 123.
function ids(token) {
  const m = /^token_id:(\d+)$/.exec(token);
  assert(m, `not a token id: ${JSON.stringify(token)}`);
  return Number(m[1]);
}

await checks.run('the demo model is served as "demo"', async () => {
  const models = await client.models.list();
  assertEq(models.data.map((m) => m.id), ['demo'], 'model ids');
});

for (const [i, g] of reference.greedy.entries()) {
  const want = expected(g);
  const maxTokens = reference.greedy_max_new_tokens;
  if (g.kind === 'text') {
    await checks.run(`completion ${i} equals PyTorch's greedy tokens: ${JSON.stringify(g.prompt)}`,
                     async () => {
      const r = await client.completions.create({ model: 'demo', prompt: g.prompt,
                                                  max_tokens: maxTokens, temperature: 0,
                                                  logprobs: 0, return_tokens_as_token_ids: true });
      assertEq(r.choices[0].logprobs.tokens.map(ids), g.output_ids, 'token ids');
      assertEq(r.choices[0].text, want.text, 'text');
      assertEq(r.choices[0].finish_reason, want.finish, 'finish_reason');
      assertEq(r.usage.prompt_tokens, g.prompt_ids.length, 'prompt tokens');
    });
  } else {
    await checks.run(`chat ${i} equals PyTorch's greedy tokens: ${JSON.stringify(g.messages)}`,
                     async () => {
      const r = await client.chat.completions.create({ model: 'demo', messages: g.messages,
                                                       max_tokens: maxTokens, temperature: 0,
                                                       logprobs: true,
                                                       return_tokens_as_token_ids: true });
      assertEq(r.choices[0].logprobs.content.map((c) => ids(c.token)), g.output_ids, 'token ids');
      assertEq(r.choices[0].message.content, want.text, 'content');
      assertEq(r.choices[0].finish_reason, want.finish, 'finish_reason');
      assertEq(r.usage.prompt_tokens, g.prompt_ids.length, 'prompt tokens');
    });
  }
}

await checks.run('a sampled answer is text, not noise', async () => {
  const r = await client.completions.create({ model: 'demo', prompt: 'And God said,',
                                              max_tokens: 32, temperature: 0.8, seed: 1 });
  const words = r.choices[0].text.trim().split(/\s+/);
  assert(words.length >= 4, `too few words: ${JSON.stringify(r.choices[0].text)}`);
  // Mostly real words: letters, with punctuation at their edges.
  const wordy = words.filter((w) => /^[("'`]*[A-Za-z]+[-'A-Za-z]*[.,;:!?)"']*$/.test(w)).length;
  assert(wordy / words.length > 0.8, `not word-like: ${JSON.stringify(r.choices[0].text)}`);
});

await stopServer(server);
process.exit(checks.summary());
