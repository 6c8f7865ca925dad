// A small Hugging Face hub for the pull tests: real HTTP on loopback, speaking the hub's URL
// layout and headers as huggingface_hub and nanoinfer read them.
//
//   GET  /api/models/ORG/NAME/revision/REV[?blobs=true]  {sha, siblings: [{rfilename, blobId, size,
//                                                        lfs: {sha256, size, pointerSize}}]}
//   GET  /ORG/NAME/resolve/REV/PATH   an LFS file: 302 to the content server, with X-Repo-Commit,
//                                     X-Linked-Etag (its sha256) and X-Linked-Size; a small file:
//                                     200 with its bytes and ETag (its git blob sha1)
//   GET  CDN/blobs/SHA256             the bytes, with Range requests (206)
//
// The content server is a second server on another port, as the hub's CDN is another host, so a
// test can see that the token never reaches it. Errors carry X-Error-Code / X-Error-Message.
// Every body byte served is counted per repository path, and a test can cut a transfer after N
// bytes or corrupt a byte of what is served.
import crypto from 'node:crypto';
import http from 'node:http';

const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');
export const gitBlobSha1 = (buf) =>
  crypto.createHash('sha1').update(Buffer.concat([Buffer.from(`blob ${buf.length}\0`), buf])).digest('hex');

// Files stored through LFS on the hub: weights (by suffix) and anything over 10 KiB.
const isLfs = (path, buf) => /\.(safetensors|gguf|bin)$/.test(path) || buf.length > 10 * 1024;

// `repos`: { 'org/name': { files: { path: Buffer }, token?: 'hf_...' (a private repository) } }.
export async function startHub(repos) {
  const hub = {
    repos: {},
    served: {},         // 'org/name/path' -> body bytes sent
    requests: [],       // { server: 'hub' | 'cdn', method, url, range, authorization }
    cut: null,          // { path: 'org/name/path', after: N }: the next transfer of it stops after N bytes
    corrupt: null,      // { path: 'org/name/path', offset }: that byte is served flipped
    ignoreRange: false, // answer Range requests with the whole file (200), as some servers do
  };
  for (const [id, repo] of Object.entries(repos)) {
    const commit = crypto.createHash('sha1').update(`commit of ${id}`).digest('hex');
    const files = {};
    for (const [path, buf] of Object.entries(repo.files)) {
      const lfs = isLfs(path, buf);
      const pointer = `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256(buf)}\nsize ${buf.length}\n`;
      files[path] = { buf, lfs, sha256: sha256(buf), blobId: lfs ? gitBlobSha1(Buffer.from(pointer)) : gitBlobSha1(buf),
                      pointerSize: pointer.length };
    }
    hub.repos[id] = { commit, refs: { main: commit }, files, token: repo.token };
  }
  const byBlob = (sha) => {
    for (const [id, repo] of Object.entries(hub.repos)) {
      for (const [path, f] of Object.entries(repo.files)) if (f.sha256 === sha) return { key: `${id}/${path}`, f };
    }
    return null;
  };

  const cdn = http.createServer((req, res) => {
    record('cdn', req);
    const m = /^\/blobs\/([0-9a-f]{64})$/.exec(new URL(req.url, 'http://x').pathname);
    const found = m && byBlob(m[1]);
    if (!found) return error(res, 404, 'EntryNotFound', 'blob not found');
    sendBytes(req, res, found.key, found.f.buf, { ETag: `"${found.f.sha256}"` });
  });

  const server = http.createServer((req, res) => {
    record('hub', req);
    const url = new URL(req.url, 'http://x');
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    if (m) return listing(req, res, m[1], decodeURIComponent(m[2]), url.searchParams.get('blobs') === 'true');
    m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (m) return resolve(req, res, m[1], decodeURIComponent(m[2]), decodeURIComponent(m[3]));
    error(res, 404, null, 'not found');
  });

  function record(name, req) {
    hub.requests.push({ server: name, method: req.method, url: req.url, range: req.headers.range,
                        authorization: req.headers.authorization });
  }
  function error(res, status, code, message) {
    const headers = { 'Content-Type': 'application/json', 'X-Error-Message': message };
    if (code) headers['X-Error-Code'] = code;
    res.writeHead(status, headers);
    res.end(JSON.stringify({ error: message }));
  }
  // The repository and commit a request names, or null after answering as the hub does (401
  // for a repository that is missing or private without its token, 404 for a revision).
  function open(req, res, id, rev) {
    const repo = hub.repos[id];
    const token = (req.headers.authorization || '').replace(/^Bearer /, '');
    if (!repo || (repo.token && token !== repo.token)) {
      error(res, 401, 'RepoNotFound', 'Repository not found');
      return null;
    }
    const commit = repo.refs[rev] || (rev === repo.commit ? rev : null);
    if (!commit) {
      error(res, 404, 'RevisionNotFound', `Invalid rev id: ${rev}`);
      return null;
    }
    return { repo, commit };
  }
  function listing(req, res, id, rev, blobs) {
    const o = open(req, res, id, rev);
    if (!o) return;
    const siblings = Object.entries(o.repo.files).map(([path, f]) => {
      if (!blobs) return { rfilename: path };
      const s = { rfilename: path, blobId: f.blobId, size: f.buf.length };
      if (f.lfs) s.lfs = { sha256: f.sha256, size: f.buf.length, pointerSize: f.pointerSize };
      return s;
    });
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ _id: id, id, modelId: id, sha: o.commit, private: !!o.repo.token, siblings }));
  }
  function resolve(req, res, id, rev, path) {
    const o = open(req, res, id, rev);
    if (!o) return;
    const f = o.repo.files[path];
    if (!f) return error(res, 404, 'EntryNotFound', `${path} does not exist on "${rev}"`);
    const common = { 'X-Repo-Commit': o.commit };
    if (f.lfs) {
      res.writeHead(302, { ...common, Location: `${hub.cdnUrl}/blobs/${f.sha256}`, 'X-Linked-Etag': `"${f.sha256}"`,
                           'X-Linked-Size': String(f.buf.length), ETag: `"${f.blobId}"`, 'Content-Length': '0' });
      return res.end();
    }
    sendBytes(req, res, `${id}/${path}`, f.buf, { ...common, ETag: `"${f.blobId}"` });
  }
  // The bytes from a Range request's start (206) or all of them (200), through the test's
  // faults, counted.
  function sendBytes(req, res, key, buf, headers) {
    let start = 0;
    const range = hub.ignoreRange ? null : /^bytes=(\d+)-$/.exec(req.headers.range || '');
    if (range) {
      start = Number(range[1]);
      if (start >= buf.length) {
        res.writeHead(416, { 'Content-Range': `bytes */${buf.length}` });
        return res.end();
      }
    }
    let body = Buffer.from(buf.subarray(start));
    if (hub.corrupt && hub.corrupt.path === key && hub.corrupt.offset >= start) body[hub.corrupt.offset - start] ^= 0x01;
    const h = { ...headers, 'Accept-Ranges': 'bytes', 'Content-Length': String(body.length),
                'Content-Type': 'application/octet-stream' };
    if (range) h['Content-Range'] = `bytes ${start}-${buf.length - 1}/${buf.length}`;
    res.writeHead(range ? 206 : 200, h);
    if (req.method === 'HEAD') return res.end();
    const count = (n) => { hub.served[key] = (hub.served[key] || 0) + n; };
    if (hub.cut && hub.cut.path === key) {
      const n = Math.min(hub.cut.after, body.length);
      hub.cut = null;
      count(n);
      // The connection breaks mid-body: what was written arrives, then the socket closes.
      res.write(body.subarray(0, n), () => res.socket.destroy());
      return;
    }
    count(body.length);
    res.end(body);
  }

  const listen = (s) => new Promise((ok) => s.listen(0, '127.0.0.1', () => ok(s.address().port)));
  hub.cdnUrl = `http://127.0.0.1:${await listen(cdn)}`;
  hub.url = `http://127.0.0.1:${await listen(server)}`;
  hub.close = () => Promise.all([server, cdn].map((s) => new Promise((ok) => {
    s.closeAllConnections();
    s.close(ok);
  })));
  return hub;
}
