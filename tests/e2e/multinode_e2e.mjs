// Two nodes as two processes on one machine: node 0 is `locus serve`, node 1 the same command
// with --node-rank 1 (headless), the demo model's --tensor-parallel-size 2 ranks split one per
// node, their collectives over the TCP group. Through node 0 the official OpenAI client gets
// the greedy tokens PyTorch computed (models/demo/reference.json); stopping node 0 ends node 1
// with exit 0; a node 1 that dies turns node 0's requests into 503 errors that say why, never a
// hang or a crash.
//
//   node tests/e2e/multinode_e2e.mjs --locus build/cpu/locus --demo models/demo
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import OpenAI from 'openai';
import { assert, assertEq, Checks, launchServer, parseArgs, stopServer } from './harness.mjs';

const args = parseArgs(process.argv, ['locus', 'demo']);
const reference = JSON.parse(fs.readFileSync(path.join(args.demo, 'reference.json'), 'utf8'));
const checks = new Checks();

// A free port below Linux's ephemeral range (32768 and up), so that no outgoing connection of
// this or a concurrent test can take it between this check and node 0's listen.
async function freePort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    const free = await new Promise((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

// Node k > 0: no server, no output to wait for; resolves with its exit code when it ends.
function startWorker(masterPort) {
  const child = spawn(args.locus, ['serve', '--tensor-parallel-size', '2', '--nnodes', '2',
                                   '--node-rank', '1', '--master-port', String(masterPort),
                                   '--device', 'cpu'],
                      { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve(code ?? sig)));
  return { child, exited, stderr: () => stderr };
}

function startLeader(masterPort) {
  return launchServer(args.locus, ['--tensor-parallel-size', '2', '--nnodes', '2',
                                   '--master-port', String(masterPort), '--device', 'cpu']);
}

function within(promise, ms, what) {
  return Promise.race([promise, new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms))]);
}

const ids = (token) => Number(/^token_id:(\d+)$/.exec(token)[1]);

{
  const masterPort = await freePort();
  const worker = startWorker(masterPort);
  const server = await startLeader(masterPort);
  const client = new OpenAI({ apiKey: 'none', baseURL: `${server.baseUrl}/v1`, maxRetries: 0 });
  for (const [i, g] of reference.greedy.entries()) {
    if (g.kind !== 'text') continue;
    await checks.run(`two nodes: completion ${i} equals PyTorch's greedy tokens`, async () => {
      const r = await client.completions.create({ model: 'demo', prompt: g.prompt,
                                                  max_tokens: reference.greedy_max_new_tokens,
                                                  temperature: 0, logprobs: 0,
                                                  return_tokens_as_token_ids: true });
      assertEq(r.choices[0].logprobs.tokens.map(ids), g.output_ids, 'token ids');
    });
  }
  await checks.run('two nodes: concurrent requests all finish', async () => {
    const rs = await Promise.all([...Array(8).keys()].map((k) => client.completions.create({
      model: 'demo', prompt: `Request ${k}: and the`, max_tokens: 12, temperature: 0.8, seed: k })));
    for (const r of rs) assertEq(r.usage.completion_tokens, 12, 'completion tokens');
  });
  await checks.run('stopping node 0 ends node 1 cleanly', async () => {
    assertEq(await stopServer(server), 0, 'node 0 exit');
    assertEq(await within(worker.exited, 30000, 'node 1 exit'), 0,
             `node 1 exit (stderr: ${worker.stderr()})`);
  });
}

{
  const masterPort = await freePort();
  const worker = startWorker(masterPort);
  const server = await startLeader(masterPort);
  const client = new OpenAI({ apiKey: 'none', baseURL: `${server.baseUrl}/v1`, maxRetries: 0 });
  await checks.run('a node that dies fails the requests with the reason, node 0 stays up',
                   async () => {
    worker.child.kill('SIGKILL');
    await worker.exited;
    let error = null;
    try {
      await within(client.completions.create({ model: 'demo', prompt: 'And God said,',
                                                max_tokens: 8 }), 30000, 'the request');
    } catch (e) {
      error = e;
    }
    assert(error && error.status === 503, `want a 503, got ${error}`);
    assert(/node 1/.test(error.message), `the error names node 1: ${error.message}`);
    const health = await fetch(`${server.baseUrl}/health`);
    assertEq(health.status, 503, '/health');
  });
  assertEq(await stopServer(server), 0, 'node 0 exit after its peer died');
}

process.exit(checks.summary());
