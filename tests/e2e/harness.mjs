// Shared pieces of the end-to-end tests: a throwaway model folder (the qwen3-moe golden fixture's
// architecture, widened to a real tokenizer's vocabulary, dummy weights), a `locus serve` child
// process on 127.0.0.1 with an ephemeral port, and a tiny check runner.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

let deviceArg = null;

export function parseArgs(argv, required = ['locus', 'fixtures', 'tokenizer']) {
  const args = {};
  for (let i = 2; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const need of required) {
    if (!args[need]) throw new Error(`missing --${need}`);
  }
  deviceArg = args.device ?? null;
  return args;
}

// A model folder whose token ids cover the tokenizer: the tiny Qwen3-MoE config with the
// tokenizer's vocabulary, its tokenizer.json + tokenizer_config.json (chat template), and a
// generation_config.json with Qwen3's EOS ids and sampling defaults.
export function makeModelDir(args, { maxPositions = 512 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'locus-e2e-'));
  const config = JSON.parse(
    fs.readFileSync(path.join(args.fixtures, 'models', 'qwen3-moe', 'config.json'), 'utf8'));
  config.vocab_size = 151936;
  config.hidden_size = 64;
  config.max_position_embeddings = maxPositions;
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  fs.writeFileSync(path.join(dir, 'generation_config.json'),
                   JSON.stringify({ eos_token_id: [151645, 151643], temperature: 0.7, top_p: 0.8,
                                    top_k: 20 }));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    fs.copyFileSync(path.join(args.tokenizer, f), path.join(dir, f));
  }
  return dir;
}

// Starts `locus serve` on the dummy-weight model folder and resolves once it prints its address.
export function startServer(locus, modelDir, extraArgs = []) {
  return launchServer(locus, [modelDir, '--load-format', 'dummy', '--served-model-name', 'tiny',
                              ...extraArgs]);
}

// Starts `locus serve SERVE_ARGS` on 127.0.0.1, an ephemeral port.
export function launchServer(locus, serveArgs) {
  // --device in the test's own arguments (e.g. cuda on the GPU machine) reaches every server;
  // on a GPU each takes a third of its memory, so the test's two servers fit side by side.
  const device = deviceArg ? ['--device', deviceArg] : [];
  if (deviceArg === 'cuda') device.push('--gpu-memory-utilization', '0.3');
  const child = spawn(locus, ['serve', ...serveArgs, '--host', '127.0.0.1', '--port', '0',
                              ...device],
                      { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${stderr}`)), 120000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/serving \S+ on http:\/\/([\d.]+):(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ child, baseUrl: `http://${m[1]}:${m[2]}`, port: Number(m[2]),
                  stderr: () => stderr });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before serving:\n${stderr}`));
    });
  });
}

export function stopServer(server, signal = 'SIGTERM', timeoutMs = 30000) {
  return new Promise((resolve) => {
    if (server.child.exitCode !== null) return resolve(server.child.exitCode);
    const timer = setTimeout(() => { server.child.kill('SIGKILL'); resolve('timeout'); }, timeoutMs);
    server.child.once('exit', (code, sig) => { clearTimeout(timer); resolve(code ?? sig); });
    server.child.kill(signal);
  });
}

export class Checks {
  constructor() { this.failures = []; this.passed = 0; }
  async run(name, fn) {
    const start = Date.now();
    try {
      await fn();
      this.passed += 1;
      console.log(`ok   ${name} (${Date.now() - start} ms)`);
    } catch (e) {
      this.failures.push(name);
      console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  summary() {
    console.log(`${this.passed} passed, ${this.failures.length} failed`);
    if (this.failures.length) console.log(`failed: ${this.failures.join(', ')}`);
    return this.failures.length === 0 ? 0 : 1;
  }
}

export function assert(cond, message) {
  if (!cond) throw new Error(message);
}

export function assertEq(got, want, message) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${message}: got ${g}, want ${w}`);
}

export async function metrics(baseUrl) {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const value = (name) => {
    const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm'));
    return m ? Number(m[1]) : undefined;
  };
  return { text, value };
}

// Polls /metrics until no request runs or waits and no KV block is in use.
export async function waitIdle(baseUrl, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await metrics(baseUrl);
    if (last.value('vllm:num_requests_running') === 0 &&
        last.value('vllm:num_requests_waiting') === 0 &&
        last.value('vllm:kv_cache_usage_perc') === 0) {
      return last;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server not idle after ${timeoutMs} ms:\n${last && last.text}`);
}

// What the API answers for one of models/demo/reference.json's greedy runs: the reference keeps
// the end token it stopped on, the API stops there and leaves it out.
const DEMO_END_TOKENS = ['<|im_end|>', '<|endoftext|>'];
export function demoExpected(g) {
  let text = g.output_text;
  let finish = 'length';
  for (const end of DEMO_END_TOKENS) {
    if (text.endsWith(end)) {
      text = text.slice(0, -end.length);
      finish = 'stop';
    }
  }
  return { text, finish };
}
