// `locus serve --async-scheduling` on the trained demo model, through the official OpenAI
// client: the greedy answers are PyTorch's (models/demo/reference.json) one at a time and all at
// once, seeded samples and stop strings give what a server without the flag gives, and a stream
// the client aborts mid-decode leaves the server idle with every KV block free.
//
//   node tests/e2e/async_e2e.mjs --locus build/cpu/locus --demo models/demo
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { assert, assertEq, Checks, demoExpected as expected, launchServer, parseArgs, stopServer,
         waitIdle } from './harness.mjs';

const args = parseArgs(process.argv, ['locus', 'demo']);
const reference = JSON.parse(fs.readFileSync(path.join(args.demo, 'reference.json'), 'utf8'));
const asyncServer = await launchServer(args.locus, ['--async-scheduling']);
const syncServer = await launchServer(args.locus, ['--no-async-scheduling']);
const client = (server) =>
  new OpenAI({ apiKey: 'none', baseURL: `${server.baseUrl}/v1`, maxRetries: 0 });
const fast = client(asyncServer);
const plain = client(syncServer);
const checks = new Checks();


const texts = reference.greedy.filter((g) => g.kind === 'text');
assert(texts.length >= 2, 'the reference has text prompts');
const maxTokens = reference.greedy_max_new_tokens;

async function greedy(g) {
  const r = await fast.completions.create({ model: 'demo', prompt: g.prompt,
                                            max_tokens: maxTokens, temperature: 0 });
  const want = expected(g);
  assertEq(r.choices[0].text, want.text, `text of ${JSON.stringify(g.prompt)}`);
  assertEq(r.choices[0].finish_reason, want.finish, 'finish_reason');
}

await checks.run('the server queues decode steps ahead', async () => {
  assert(/async scheduling: decode steps are queued/.test(asyncServer.stderr()),
         `no async scheduling line in:\n${asyncServer.stderr()}`);
  assert(!/async scheduling/.test(syncServer.stderr()), 'the plain server says it queues steps');
});

await checks.run('greedy answers equal PyTorch\'s, one at a time', async () => {
  for (const g of texts) await greedy(g);
});

await checks.run('greedy answers equal PyTorch\'s, all at once (batched decode)', async () => {
  await Promise.all([...texts, ...texts].map(greedy));
});

await checks.run('chat answers equal PyTorch\'s', async () => {
  for (const g of reference.greedy.filter((x) => x.kind !== 'text')) {
    const r = await fast.chat.completions.create({ model: 'demo', messages: g.messages,
                                                   max_tokens: maxTokens, temperature: 0 });
    const want = expected(g);
    assertEq(r.choices[0].message.content, want.text, 'content');
    assertEq(r.choices[0].finish_reason, want.finish, 'finish_reason');
  }
});

await checks.run('seeded samples equal those of a server without the flag', async () => {
  const ask = (c, seed) =>
    c.completions.create({ model: 'demo', prompt: 'And God said,', max_tokens: 48,
                           temperature: 0.9, top_p: 0.95, seed });
  const seeds = [1, 2, 3, 4];
  const got = await Promise.all(seeds.map((s) => ask(fast, s)));
  const want = await Promise.all(seeds.map((s) => ask(plain, s)));
  for (let i = 0; i < seeds.length; ++i) {
    assertEq(got[i].choices[0].text, want[i].choices[0].text, `seed ${seeds[i]}`);
    assertEq(got[i].choices[0].finish_reason, want[i].choices[0].finish_reason, 'finish_reason');
  }
});

await checks.run('a stop string ends the answer where it does without the flag', async () => {
  const ask = (c) => c.completions.create({ model: 'demo', prompt: 'In the beginning',
                                            max_tokens: 64, temperature: 0, stop: [' the'] });
  const [got, want] = await Promise.all([ask(fast), ask(plain)]);
  assertEq(got.choices[0].text, want.choices[0].text, 'text');
  assertEq(got.choices[0].finish_reason, 'stop', 'finish_reason');
});

await checks.run('an aborted stream leaves the server idle with its KV blocks free', async () => {
  const controller = new AbortController();
  const stream = await fast.completions.create(
    { model: 'demo', prompt: 'Once upon a time', max_tokens: 400, temperature: 0,
      ignore_eos: true, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.text) chunks += 1;
      if (chunks === 5) controller.abort();
    }
  } catch (e) {
    assert(controller.signal.aborted, `stream failed before the abort: ${e}`);
  }
  assert(chunks >= 5, `only ${chunks} chunks arrived`);
  await waitIdle(asyncServer.baseUrl);
  await greedy(texts[0]);  // and it still answers
});

await stopServer(asyncServer);
await stopServer(syncServer);
process.exit(checks.summary());
