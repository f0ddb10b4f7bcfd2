#!/usr/bin/env node
// A minimal HTTP CONNECT proxy for tests of kubeconfig's proxy-url: it tunnels to 127.0.0.1
// only, prints its URL on stdout, and appends one line per tunnel to --log FILE.
// Usage: proxy.js [--log FILE] [--watch-stdin]
'use strict';
const http = require('http');
const net = require('net');
const fs = require('fs');

let logFd = null, watchStdin = false;
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === '--log') logFd = fs.openSync(process.argv[++i], 'a');
  else if (process.argv[i] === '--watch-stdin') watchStdin = true;
  else { process.stderr.write(`proxy: unknown option '${process.argv[i]}'\n`); process.exit(2); }
}
const server = http.createServer((req, res) => { res.writeHead(405); res.end('CONNECT only\n'); });
server.on('connect', (req, client, head) => {
  const [host, port] = req.url.split(':');
  if (logFd !== null) fs.writeSync(logFd, `CONNECT ${req.url}\n`);
  if (host !== '127.0.0.1' && host !== 'localhost') { client.end('HTTP/1.1 403 Forbidden\r\n\r\n'); return; }
  const up = net.connect(Number(port), '127.0.0.1', () => {
    client.write('HTTP/1.1 200 Connection established\r\n\r\n');
    if (head && head.length) up.write(head);
    up.pipe(client);
    client.pipe(up);
  });
  up.on('error', () => client.destroy());
  client.on('error', () => up.destroy());
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${server.address().port}\n`));
const stop = () => process.exit(0);
process.on('SIGTERM', stop);
if (watchStdin) { process.stdin.on('end', stop); process.stdin.on('error', stop); process.stdin.resume(); }
setTimeout(stop, 300 * 1000).unref();
