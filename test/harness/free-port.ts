import * as net from 'net';

/**
 * A port that was free a moment ago on 127.0.0.1: the kernel picks it (bind to :0), we close the
 * listener and hand the number on. Another process can take it in between; callers that spawn a
 * server on it retry with a new port when the server reports "address already in use".
 */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}
