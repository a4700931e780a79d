// `locus serve` end to end, with the official OpenAI Node client, curl and raw sockets:
// chat + completions, streaming and not, n=2, stop strings, logprobs, usage against /tokenize,
// stream == non-stream for the same seed, 30+ malformed or hostile requests (each gets its
// documented error and the server stays up with no leaked KV blocks), a client that disconnects
// mid-stream, 500 concurrent streams, `locus bench serve` (random and agentic), `bench sweep` and
// `bench plot` against this server, and a clean SIGTERM exit.
//
//   node tests/e2e/openai_e2e.mjs --locus build/cpu/locus --fixtures tests/fixtures \
//        --tokenizer build/test-data/tokenizers/qwen3
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import OpenAI from 'openai';
import { assert, assertEq, Checks, makeModelDir, metrics, parseArgs, startServer, stopServer,
         waitIdle } from './harness.mjs';

const args = parseArgs(process.argv);
const API_KEY = 'e2e-secret';
const modelDir = makeModelDir(args);
const server = await startServer(args.locus, modelDir, [
  '--api-key', API_KEY, '--max-model-len', '256', '--max-num-seqs', '128', '--cpu-openblas',
  '--max-request-body-mib', '1', '--seed', '7',
]);
const base = server.baseUrl;
const client = new OpenAI({ apiKey: API_KEY, baseURL: `${base}/v1`, maxRetries: 0 });
const checks = new Checks();
const auth = { Authorization: `Bearer ${API_KEY}`, 'Content-Type': 'application/json' };

async function post(path, body, headers = auth) {
  const r = await fetch(`${base}${path}`, { method: 'POST', headers,
                                            body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, json, text };
}

async function tokenCount(body) {
  const r = await post('/tokenize', body);
  assertEq(r.status, 200, `/tokenize ${r.text}`);
  assertEq(r.json.count, r.json.tokens.length, '/tokenize count');
  return r.json.count;
}

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name three prime numbers. 你好 👋🏽' },
];

await checks.run('health, version, models', async () => {
  assertEq((await fetch(`${base}/health`)).status, 200, '/health');
  const v = await (await fetch(`${base}/version`)).json();
  assert(typeof v.version === 'string', '/version has a version');
  const models = await client.models.list();
  assertEq(models.data.map((m) => m.id), ['tiny'], 'model ids');
  assertEq(models.data[0].max_model_len, 256, 'max_model_len');
});

let chatText;
await checks.run('chat non-stream: usage equals the tokenizer counts', async () => {
  const r = await client.chat.completions.create({
    model: 'tiny', messages, max_tokens: 12, temperature: 0.8, seed: 42, ignore_eos: true,
  });
  assertEq(r.object, 'chat.completion', 'object');
  assertEq(r.choices.length, 1, 'choices');
  assertEq(r.choices[0].message.role, 'assistant', 'role');
  assertEq(r.choices[0].finish_reason, 'length', 'finish_reason');
  chatText = r.choices[0].message.content;
  assert(typeof chatText === 'string' && chatText.length > 0, 'content');
  const prompt = await tokenCount({ model: 'tiny', messages, add_generation_prompt: true });
  assertEq(r.usage.prompt_tokens, prompt, 'usage.prompt_tokens vs /tokenize');
  assertEq(r.usage.completion_tokens, 12, 'usage.completion_tokens');
  assertEq(r.usage.total_tokens, prompt + 12, 'usage.total_tokens');
  const decoded = await post('/tokenize', { model: 'tiny', prompt: chatText, add_special_tokens: false });
  assert(decoded.json.count > 0, 'completion text tokenizes');
});

await checks.run('chat stream == non-stream for the same seed; include_usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'tiny', messages, max_tokens: 12, temperature: 0.8, seed: 42, ignore_eos: true,
    stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let role;
  let finish;
  let usage;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    assertEq(chunk.object, 'chat.completion.chunk', 'chunk object');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert(chunks >= 3, `several chunks (${chunks})`);
  assertEq(role, 'assistant', 'first delta role');
  assertEq(text, chatText, 'streamed text');
  assertEq(finish, 'length', 'finish_reason');
  assert(usage && usage.completion_tokens === 12, `usage chunk ${JSON.stringify(usage)}`);
});

await checks.run('completions n=2, stream and not, same seed', async () => {
  const req = { model: 'tiny', prompt: 'The capital of France is', max_tokens: 10, n: 2,
                temperature: 1.0, seed: 5, ignore_eos: true };
  const r = await client.completions.create(req);
  assertEq(r.object, 'text_completion', 'object');
  assertEq(r.choices.map((c) => c.index).sort(), [0, 1], 'indices');
  assertEq(r.usage.completion_tokens, 20, 'completion tokens of both');
  assertEq(r.usage.prompt_tokens, await tokenCount({ model: 'tiny', prompt: req.prompt }),
           'prompt tokens vs /tokenize');
  const texts = ['', ''];
  for await (const chunk of await client.completions.create({ ...req, stream: true })) {
    for (const c of chunk.choices) texts[c.index] += c.text;
  }
  const want = [0, 1].map((i) => r.choices.find((c) => c.index === i).text);
  assertEq(texts, want, 'streamed texts per index');
  assert(want[0] !== want[1], 'the two samples differ (child seeds differ)');
});

await checks.run('completions: token-id prompt, list of prompts, echo', async () => {
  const ids = (await post('/tokenize', { model: 'tiny', prompt: 'Hello world' })).json.tokens;
  const a = await client.completions.create({ model: 'tiny', prompt: ids, max_tokens: 5,
                                              temperature: 0, ignore_eos: true });
  const b = await client.completions.create({ model: 'tiny', prompt: 'Hello world', max_tokens: 5,
                                              temperature: 0, ignore_eos: true });
  assertEq(a.choices[0].text, b.choices[0].text, 'ids and text prompt agree (greedy)');
  const two = await client.completions.create({ model: 'tiny', prompt: ['Hello world', 'Bye'],
                                                max_tokens: 3, temperature: 0, ignore_eos: true });
  assertEq(two.choices.length, 2, 'one choice per prompt');
  assertEq(two.choices.find((c) => c.index === 0).text, b.choices[0].text.slice(0, two.choices[0].text.length), 'prefix of the 5-token answer');
  const e = await client.completions.create({ model: 'tiny', prompt: 'Hello world', max_tokens: 5,
                                              temperature: 0, ignore_eos: true, echo: true });
  assertEq(e.choices[0].text, 'Hello world' + b.choices[0].text, 'echo');
});

await checks.run('stop strings cut the text and finish with stop', async () => {
  const full = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time',
                                                 max_tokens: 40, temperature: 0, ignore_eos: true });
  const text = full.choices[0].text;
  assert(text.length >= 12, `long enough text (${JSON.stringify(text)})`);
  const stop = [...text].slice(6, 9).join('');
  const cut = text.slice(0, text.indexOf(stop));
  for (const stream of [false, true]) {
    const req = { model: 'tiny', prompt: 'Once upon a time', max_tokens: 40, temperature: 0,
                  ignore_eos: true, stop: [stop] };
    let got;
    let finish;
    if (stream) {
      got = '';
      for await (const c of await client.completions.create({ ...req, stream: true })) {
        got += c.choices[0]?.text ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
      }
    } else {
      const r = await client.completions.create(req);
      got = r.choices[0].text;
      finish = r.choices[0].finish_reason;
      assertEq(r.choices[0].stop_reason, stop, 'stop_reason');
    }
    assertEq(got, cut, `text before the stop string (stream=${stream})`);
    assertEq(finish, 'stop', 'finish_reason');
  }
  const inc = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 40,
                                                temperature: 0, ignore_eos: true, stop: [stop],
                                                include_stop_str_in_output: true });
  assertEq(inc.choices[0].text, cut + stop, 'include_stop_str_in_output');
});

await checks.run('logprobs: chat top_logprobs and completions logprobs', async () => {
  const r = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 6,
                                                   temperature: 0, logprobs: true, top_logprobs: 3,
                                                   ignore_eos: true });
  const content = r.choices[0].logprobs.content;
  assertEq(content.length, 6, 'one entry per token');
  for (const t of content) {
    assert(t.logprob <= 0, 'logprob <= 0');
    assertEq(t.top_logprobs.length, 3, 'top_logprobs');
    assert(t.top_logprobs[0].logprob >= t.top_logprobs[2].logprob, 'sorted');
    assertEq(t.logprob, t.top_logprobs[0].logprob, 'greedy token is the top one');
    assert(Array.isArray(t.bytes), 'bytes');
  }
  const c = await client.completions.create({ model: 'tiny', prompt: 'Hi', max_tokens: 4,
                                              temperature: 0, logprobs: 2, ignore_eos: true });
  const lp = c.choices[0].logprobs;
  assertEq(lp.tokens.length, 4, 'tokens');
  assertEq(lp.token_logprobs.length, 4, 'token_logprobs');
  assertEq(lp.top_logprobs.length, 4, 'top_logprobs');
  assertEq(lp.text_offset[0], 0, 'first offset');
  assertEq(lp.tokens.join(''), c.choices[0].text, 'tokens concatenate to the text');
});

await checks.run('curl speaks SSE', async () => {
  const out = await new Promise((resolve, reject) => {
    execFile('curl', ['-sN', `${base}/v1/completions`, '-H', `Authorization: Bearer ${API_KEY}`,
                      '-H', 'Content-Type: application/json', '-d',
                      JSON.stringify({ model: 'tiny', prompt: 'Hi', max_tokens: 5, stream: true,
                                       temperature: 0, ignore_eos: true })],
             (err, stdout) => (err ? reject(err) : resolve(stdout)));
  });
  const events = out.split('\n\n').filter((e) => e.length);
  assert(events.every((e) => e.startsWith('data: ')), `every event is data: (${out})`);
  assertEq(events[events.length - 1], 'data: [DONE]', 'terminated by [DONE]');
  const text = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)).choices[0]?.text ?? '').join('');
  const ref = await client.completions.create({ model: 'tiny', prompt: 'Hi', max_tokens: 5,
                                                temperature: 0, ignore_eos: true });
  assertEq(text, ref.choices[0].text, 'curl stream text');
});

// --- bad input: [name, request function, expected status] -----------------------------------
const big = 'x'.repeat(10 * 1024 * 1024);
const chat = (extra) => JSON.stringify({ model: 'tiny', messages, max_tokens: 4, ...extra });
const comp = (extra) => JSON.stringify({ model: 'tiny', prompt: 'Hi', max_tokens: 4, ...extra });
const bad = [
  ['invalid JSON', () => post('/v1/chat/completions', '{"model": "tiny", "messages": ['), 400],
  ['JSON array body', () => post('/v1/chat/completions', '[1, 2]'), 400],
  ['empty body', () => post('/v1/completions', ''), 400],
  ['invalid UTF-8', () => fetch(`${base}/v1/completions`, { method: 'POST', headers: auth,
      body: Buffer.concat([Buffer.from('{"model":"tiny","prompt":"'), Buffer.from([0xff, 0xfe]),
                           Buffer.from('","max_tokens":3}')]) }).then((r) => ({ status: r.status })), 400],
  ['huge max_tokens', () => post('/v1/completions', comp({ max_tokens: 1e30 })), 400],
  ['max_tokens 0', () => post('/v1/completions', comp({ max_tokens: 0 })), 400],
  ['max_tokens -1', () => post('/v1/chat/completions', chat({ max_tokens: -1 })), 400],
  ['temperature string', () => post('/v1/chat/completions', chat({ temperature: 'hot' })), 400],
  ['temperature negative', () => post('/v1/chat/completions', chat({ temperature: -1 })), 400],
  ['top_p 2', () => post('/v1/completions', comp({ top_p: 2 })), 400],
  ['absurd n', () => post('/v1/completions', comp({ n: 100000 })), 400],
  ['n 0', () => post('/v1/completions', comp({ n: 0 })), 400],
  ['logprobs too many', () => post('/v1/completions', comp({ logprobs: 50 })), 400],
  ['top_logprobs without logprobs', () => post('/v1/chat/completions', chat({ top_logprobs: 2 })), 400],
  ['token id outside vocab', () => post('/v1/completions', comp({ prompt: [1, 2, 99999999] })), 400],
  ['negative token id', () => post('/v1/completions', comp({ prompt: [-5] })), 400],
  ['empty prompt list', () => post('/v1/completions', comp({ prompt: [] })), 400],
  ['empty messages', () => post('/v1/chat/completions', chat({ messages: [] })), 400],
  ['messages not a list', () => post('/v1/chat/completions', chat({ messages: 'hi' })), 400],
  ['unknown role', () => post('/v1/chat/completions', chat({ messages: [{ role: 'wizard', content: 'x' }] })), 400],
  ['image content part', () => post('/v1/chat/completions', chat({ messages: [{ role: 'user',
      content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] })), 400],
  ['stream_options without stream', () => post('/v1/chat/completions', chat({ stream_options: { include_usage: true } })), 400],
  ['logit_bias bad key', () => post('/v1/completions', comp({ logit_bias: { abc: 1 } })), 400],
  ['stop not a string', () => post('/v1/completions', comp({ stop: 5 })), 400],
  ['best_of above n', () => post('/v1/completions', comp({ best_of: 3 })), 400],
  ['suffix', () => post('/v1/completions', comp({ suffix: 'end' })), 400],
  ['prompt longer than max-model-len', () => post('/v1/completions', comp({ prompt: 'hello '.repeat(400) })), 400],
  ['prompt + max_tokens over the context', () => post('/v1/completions', comp({ max_tokens: 250, prompt: 'hello '.repeat(20) })), 400],
  ['unknown model', () => post('/v1/completions', comp({ model: 'gpt-5' })), 404],
  ['unknown route', () => post('/v1/embeddings', comp({})), 404],
  ['wrong method', () => fetch(`${base}/v1/completions`, { headers: auth }).then((r) => ({ status: r.status })), 405],
  ['missing API key', () => post('/v1/completions', comp({}), { 'Content-Type': 'application/json' }), 401],
  ['wrong API key', () => post('/v1/completions', comp({}), { Authorization: 'Bearer nope', 'Content-Type': 'application/json' }), 401],
  ['10 MB body', () => post('/v1/completions', JSON.stringify({ model: 'tiny', prompt: big })), 413],
  ['huge seed', () => post('/v1/completions', comp({ seed: 1e300 })), 400],
  ['detokenize out of vocab', () => post('/detokenize', { model: 'tiny', tokens: [1, 1e9] }), 400],
];
for (const [name, send, status] of bad) {
  await checks.run(`bad input: ${name} -> ${status}`, async () => {
    const r = await send();
    assertEq(r.status, status, 'status');
    if (r.json !== undefined || r.text !== undefined) {
      assert(r.json && r.json.error && typeof r.json.error.message === 'string',
             `OpenAI-shaped error body: ${r.text && r.text.slice(0, 200)}`);
      assertEq(r.json.error.code, status, 'error.code');
    }
  });
}

await checks.run('slowloris and 1000 dropped connections leave the server answering', async () => {
  const slow = net.connect(server.port, '127.0.0.1');
  slow.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le');  // and never more
  const sockets = [];
  await Promise.all(Array.from({ length: 1000 }, (_, i) => new Promise((resolve) => {
    const s = net.connect(server.port, '127.0.0.1', () => {
      if (i % 2) s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"mo');
      s.destroy();
      resolve();
    });
    s.on('error', resolve);
    sockets.push(s);
  })));
  const r = await client.completions.create({ model: 'tiny', prompt: 'still there?', max_tokens: 3,
                                              temperature: 0, ignore_eos: true });
  assertEq(r.choices[0].finish_reason, 'length', 'normal request after the abuse');
  slow.destroy();
});

await checks.run('a client that disconnects mid-stream frees its KV blocks', async () => {
  // The client hangs up as soon as the stream's headers arrive. The request must still be
  // running then, whatever the device: on the GPU the tiny model generates the 200-odd tokens
  // the main server's 256-token context allows before the client can hang up, so this check
  // has its own server with an 8192-token context and asks for 8000 tokens (seconds of work
  // on the GPU; on the CPU the abort ends it at once).
  const long = await startServer(args.locus, makeModelDir(args, { maxPositions: 8192 }), [
    '--api-key', API_KEY, '--max-model-len', '8192', '--max-num-seqs', '4', '--cpu-openblas',
    '--seed', '7',
  ]);
  try {
    const aborted = (m) => Number(
      (m.text.match(/^vllm:request_success_total\{[^}]*finished_reason="abort"[^}]*\} (\d+)/m) ??
       [0, 0])[1]);
    const before = aborted(await metrics(long.baseUrl));
    const controller = new AbortController();
    const r = await fetch(`${long.baseUrl}/v1/completions`, {
      method: 'POST', headers: auth, signal: controller.signal,
      body: JSON.stringify({ model: 'tiny', prompt: 'Tell me a long story', max_tokens: 8000,
                             temperature: 0, ignore_eos: true, stream: true }) });
    assertEq(r.status, 200, 'stream started');
    controller.abort();
    // The server learns of the hang-up asynchronously; give it until the deadline.
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline && aborted(await metrics(long.baseUrl)) === before) {
      await new Promise((res) => setTimeout(res, 50));
    }
    const idle = await waitIdle(long.baseUrl, 20000);
    assertEq(aborted(idle), before + 1, 'aborted requests (this one was not run to its end)');
    const gen = idle.value('vllm:generation_tokens_total');
    assert(gen !== undefined && gen < 8000, `generation stopped early (${gen} tokens)`);
  } finally {
    await stopServer(long);
  }
});

// Parallelism on the CPU: two tensor-parallel ranks as threads over the in-process
// communicator, two data-parallel replicas behind the balancer, or two that share their experts
// (DP attention + EP MoE, stepping together, with each token exchange; the last with two
// tensor-parallel ranks per replica). Dummy weights on the CPU are the whole model's slices, so
// each server must answer like the single-rank one. Not run with --device cuda: these layouts
// need several GPUs there.
if (args.device !== 'cuda') {
  for (const flags of [['-tp', '2'], ['-dp', '2'], ['-dp', '2', '--enable-expert-parallel'],
                       ['-dp', '2', '--enable-expert-parallel', '--all2all-backend', 'naive'],
                       ['-dp', '2', '-tp', '2', '--enable-expert-parallel', '--all2all-backend',
                        'low_latency']]) {
    await checks.run(`${flags.join(' ')} answers like one rank`, async () => {
      const other = await startServer(args.locus, modelDir, [
        '--api-key', API_KEY, '--max-model-len', '256', '--max-num-seqs', '8', '--cpu-openblas',
        '--seed', '7', ...flags]);
      try {
        const otherClient = new OpenAI({ apiKey: API_KEY, baseURL: `${other.baseUrl}/v1`,
                                         maxRetries: 0 });
        const ask = (c) => c.completions.create({
          model: 'tiny', prompt: 'The capital of France is', max_tokens: 8, temperature: 0,
          ignore_eos: true, logprobs: 3 });
        const [one, two] = [await ask(client), await ask(otherClient)];
        assertEq(two.choices[0].text, one.choices[0].text, 'greedy text');
        const a = one.choices[0].logprobs.token_logprobs;
        const b = two.choices[0].logprobs.token_logprobs;
        for (let i = 0; i < a.length; ++i) {
          assert(Math.abs(a[i] - b[i]) < 1e-3, `token ${i} logprob ${b[i]} vs one rank ${a[i]}`);
        }
        assertEq(two.usage.completion_tokens, 8, 'completion tokens');
        // Several at once: each replica / the ranks together serve them all.
        const many = await Promise.all(Array.from({ length: 6 }, (_, i) => otherClient.completions
          .create({ model: 'tiny', prompt: `Question ${i}:`, max_tokens: 4, ignore_eos: true })));
        for (const r of many) assertEq(r.usage.completion_tokens, 4, 'concurrent request');
        const idle = await waitIdle(other.baseUrl);
        assertEq(idle.value('vllm:num_requests_running'), 0, 'idle afterwards');
      } finally {
        await stopServer(other);
      }
    });
  }
}

await checks.run('500 concurrent streaming requests all complete', async () => {
  const results = await Promise.all(Array.from({ length: 500 }, async (_, i) => {
    let text = '';
    let finish;
    for await (const c of await client.completions.create({
      model: 'tiny', prompt: `Request number ${i}:`, max_tokens: 6, temperature: 0.5, seed: i,
      ignore_eos: true, stream: true })) {
      text += c.choices[0]?.text ?? '';
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    return { text, finish };
  }));
  const finished = results.filter((r) => r.finish === 'length').length;
  assertEq(finished, 500, 'streams finished with length');
});

await checks.run('locus bench serve measures this server (random dataset, Poisson arrivals)', async () => {
  const out = `${modelDir}/bench-serve.json`;
  const env = { ...process.env, OPENAI_API_KEY: API_KEY };
  const run = await new Promise((resolve) => {
    execFile(args.locus, [
      'bench', 'serve', '--base-url', base, '--model', 'tiny', '--tokenizer', modelDir,
      '--num-prompts', '24', '--random-input-len', '16', '--random-output-len', '8',
      '--random-range-ratio', '0.5', '--ignore-eos', '--request-rate', '40', '--max-concurrency',
      '6', '--goodput', 'ttft:60000', '--metric-percentiles', '50,99', '--disable-tqdm',
      '--save-result', '--result-filename', out,
    ], { env, timeout: 120000 }, (error, stdout, stderr) => resolve({ error, stdout, stderr }));
  });
  assert(!run.error, `bench serve failed: ${run.error}\n${run.stderr}`);
  assert(/Serving Benchmark Result/.test(run.stdout), `result table:\n${run.stdout}`);
  const r = JSON.parse(fs.readFileSync(out, 'utf8'));
  assertEq(r.completed, 24, 'completed requests');
  assertEq(r.failed, 0, `failed requests (${JSON.stringify(r.errors)})`);
  // ignore_eos: every request produced exactly its drawn output length (4..12 tokens).
  assert(r.total_output_tokens >= 24 * 4 && r.total_output_tokens <= 24 * 12,
         `output tokens ${r.total_output_tokens}`);
  assert(r.total_input_tokens >= 24 * 8 && r.total_input_tokens <= 24 * 24,
         `input tokens ${r.total_input_tokens}`);
  assert(r.peak_concurrency >= 1 && r.peak_concurrency <= 6, `peak ${r.peak_concurrency}`);
  assert(r.ttft_ms.count === 24 && r.ttft_ms.mean > 0, 'ttft');
  assert(r.itl_ms.count > 0 && r.tpot_ms.count > 0, 'itl / tpot');
  assert(r.e2el_ms.p99 >= r.e2el_ms.p50 && r.e2el_ms.p50 >= r.ttft_ms.p50, 'percentile order');
  assertEq(r.request_goodput, r.request_throughput, 'every request meets a 60 s TTFT');
  // Scraped from this server's /metrics before and after: every prompt token was looked up.
  assert(r.server_prefix_cache && r.server_prefix_cache.queries >= r.total_input_tokens,
         `server prefix cache counters: ${JSON.stringify(r.server_prefix_cache)}`);
  assert(/Prefix cache hit rate \(server\):/.test(run.stdout), 'hit rate in the table');
});

function runLocus(argv, env = process.env) {
  return new Promise((resolve) => {
    execFile(args.locus, argv, { env, timeout: 120000 },
             (error, stdout, stderr) => resolve({ error, stdout, stderr }));
  });
}

await checks.run('locus bench serve --dataset-name agentic: multi-turn sessions, TTFT per turn', async () => {
  const out = `${modelDir}/bench-agentic.json`;
  const run = await runLocus([
    'bench', 'serve', '--base-url', base, '--model', 'tiny', '--tokenizer', modelDir,
    '--endpoint', '/v1/chat/completions', '--dataset-name', 'agentic', '--agentic-sessions', '2',
    '--agentic-turns', '3', '--agentic-system-len', '32', '--agentic-user-len', '8',
    '--agentic-tool-result-len', '16', '--agentic-output-len', '8', '--ignore-eos',
    '--disable-tqdm', '--save-result', '--result-filename', out,
  ], { ...process.env, OPENAI_API_KEY: API_KEY });
  assert(!run.error, `bench serve agentic failed: ${run.error}\n${run.stderr}`);
  assert(/TTFT by turn/.test(run.stdout), `per-turn table:\n${run.stdout}`);
  const r = JSON.parse(fs.readFileSync(out, 'utf8'));
  assertEq(r.dataset.name, 'agentic', 'dataset name');
  assertEq(r.dataset.agentic.sessions, 2, 'sessions');
  assertEq(r.completed, 6, 'completed turns (2 sessions x 3)');
  assertEq(r.failed, 0, `failed turns (${JSON.stringify(r.errors)})`);
  assertEq(r.total_output_tokens, 6 * 8, 'ignore_eos: every turn gave 8 tokens');
  const turns = r.agentic.ttft_by_turn;
  assertEq(turns.map((t) => t.turn), [1, 2, 3], 'turn indices');
  assert(turns.every((t) => t.count === 2 && t.mean_ttft_ms > 0), `per-turn counts ${JSON.stringify(turns)}`);
  // Each turn re-sends the previous context + an 8-token reply + a 16-token tool result.
  for (const k of [1, 2]) {
    const grew = turns[k].mean_prompt_tokens - turns[k - 1].mean_prompt_tokens;
    assert(grew >= 16, `turn ${k + 1} context grew by ${grew} tokens`);
  }
  const buckets = r.agentic.ttft_by_context;
  assertEq(buckets.reduce((n, b) => n + b.count, 0), 6, 'every turn in a context bucket');
  assert(buckets.every((b) => b.p90_ttft_ms >= b.p50_ttft_ms), 'bucket percentiles');
  // Later turns re-send cached blocks: the server's prefix cache hits.
  assert(r.server_prefix_cache && r.server_prefix_cache.hits > 0,
         `prefix cache hits: ${JSON.stringify(r.server_prefix_cache)}`);
});

await checks.run('locus bench sweep over concurrency 1,2, then locus bench plot', async () => {
  const out = `${modelDir}/bench-sweep.json`;
  const run = await runLocus([
    'bench', 'sweep', '--base-url', base, '--model', 'tiny', '--tokenizer', modelDir,
    '--num-prompts', '4', '--random-input-len', '16', '--random-output-len', '8', '--ignore-eos',
    '--max-concurrency', '1,2', '--target-tok-per-user', '1,1000000', '--label', 'locus e2e',
    '--disable-tqdm', '--result-filename', out,
  ], { ...process.env, OPENAI_API_KEY: API_KEY });
  assert(!run.error, `bench sweep failed: ${run.error}\n${run.stderr}`);
  assert(/Sweep Result/.test(run.stdout) && /not reached/.test(run.stdout), `table:\n${run.stdout}`);
  const r = JSON.parse(fs.readFileSync(out, 'utf8'));
  assertEq(r.command, 'bench sweep', 'command');
  assertEq(r.label, 'locus e2e', 'label');
  assertEq(r.parameter, 'max_concurrency', 'parameter');
  assertEq(r.points.map((p) => p.sweep_value), [1, 2], 'swept values');
  for (const p of r.points) {
    assertEq(p.completed, 4, 'completed per point');
    assertEq(p.failed, 0, `failed per point (${JSON.stringify(p.errors)})`);
    assert(p.ttft_ms.count === 4 && p.tpot_ms.count === 4, 'a full bench serve result per point');
    assert(p.summary.tok_per_user > 0 &&
           Math.abs(p.summary.tok_per_user - 1000 / p.tpot_ms.median) < 1e-6, 'tok/s/user');
    assertEq(p.summary.output_throughput_per_gpu, p.output_throughput, 'one GPU');
  }
  assertEq(r.points[1].max_concurrency, 2, 'point config');
  assertEq(r.targets.map((t) => t.tok_per_user), [1, 1000000], 'targets');
  assertEq(r.targets[1].output_throughput_per_gpu, null, '1M tok/s/user is not reached');

  const svg = `${modelDir}/sweep.svg`;
  const png = `${modelDir}/sweep.png`;
  const plot = await runLocus(['bench', 'plot', out, '--output', svg, '--png', png]);
  const text = fs.readFileSync(svg, 'utf8');
  assert(text.startsWith('<?xml') && text.trimEnd().endsWith('</svg>'), 'an SVG document');
  assertEq((text.match(/<polyline /g) || []).length, 1, 'one line for one result file');
  assert(text.includes('>locus e2e</text>'), 'the legend names the label');
  assert(text.includes('tok/s/user'), 'the x axis label');
  const haveRsvg = await new Promise((resolve) => {
    execFile('sh', ['-c', 'command -v rsvg-convert'], (error) => resolve(!error));
  });
  if (haveRsvg) {
    assert(!plot.error, `bench plot failed: ${plot.error}\n${plot.stderr}`);
    assertEq(fs.readFileSync(png).subarray(1, 4).toString(), 'PNG', 'PNG signature');
  } else {
    assert(plot.error && /librsvg2-bin/.test(plot.stderr), `names the package: ${plot.stderr}`);
  }
});

await checks.run('after everything: idle, no leaked KV blocks, /health still 200', async () => {
  const m = await waitIdle(base, 20000);
  assertEq(m.value('vllm:kv_cache_usage_perc'), 0, 'kv usage');
  assertEq((await fetch(`${base}/health`)).status, 200, '/health');
  assert(m.value('vllm:prompt_tokens_total') > 0, 'prompt token counter');
  assert(/vllm:time_to_first_token_seconds_bucket/.test(m.text), 'TTFT histogram');
  assert(/vllm:e2e_request_latency_seconds_count/.test(m.text), 'e2e histogram');
});

await checks.run('a full waiting queue answers 503 and the server stays up', async () => {
  const small = await startServer(args.locus, modelDir, [
    '--max-model-len', '512', '--max-num-seqs', '1', '--max-waiting-requests', '0',
    '--cpu-openblas']);
  try {
    const send = () => fetch(`${small.baseUrl}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Hello', max_tokens: 200, ignore_eos: true }) })
      .then(async (r) => ({ status: r.status, json: await r.json() }));
    const results = await Promise.all(Array.from({ length: 6 }, send));
    const statuses = results.map((r) => r.status).sort();
    assert(statuses.includes(200), `one request runs: ${statuses}`);
    assert(statuses.includes(503), `the others are refused: ${statuses}`);
    assert(statuses.every((s) => s === 200 || s === 503), `only 200/503: ${statuses}`);
    for (const r of results.filter((x) => x.status === 503)) {
      assertEq(r.json.error.code, 503, '503 error body');
    }
    assertEq((await fetch(`${small.baseUrl}/health`)).status, 200, 'still healthy');
    await waitIdle(small.baseUrl, 20000);
  } finally {
    assertEq(await stopServer(small, 'SIGINT', 30000), 0, 'SIGINT exit code');
  }
});

await checks.run('SIGTERM exits 0 within the grace period', async () => {
  const code = await stopServer(server, 'SIGTERM', 30000);
  assertEq(code, 0, 'exit code');
});

if (server.child.exitCode === null) await stopServer(server, 'SIGKILL');
fs.rmSync(modelDir, { recursive: true, force: true });
process.exit(checks.summary());
