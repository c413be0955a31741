// Server-Sent Events read over fetch (so the API key can go in a header): calls `onFrame`
// with each frame's `event:` type and joined `data:` text, and its comment lines.

import { ApiError } from './api.js';

export async function readFrames(res, onFrame) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let data = '';
      let type = 'message';
      const comments = [];
      for (const line of frame.split('\n')) {
        if (line.startsWith('data: ')) data += line.slice(6);
        else if (line.startsWith('event: ')) type = line.slice(7);
        else if (line.startsWith(': ')) comments.push(line.slice(2));
      }
      onFrame({ type, data, comments });
    }
  }
}

/** Throws the server's error (an ApiError, so a refused key reads as one) for a response that is not 2xx. */
export async function ensureOk(res) {
  if (res.ok) return;
  const body = await res.json().catch(() => ({}));
  throw new ApiError(res.status, body.error || {});
}
