/**
 * Redis' own `keyHashSlot` (cluster.c), byte for byte, as the oracle for "which slot does Redis put
 * this name in". ioredis routes by the `cluster-key-slot` package instead, which disagrees with
 * Redis on an empty hash tag: for `a{}b}` Redis hashes the whole name, cluster-key-slot hashes `b`.
 */

/** CRC16-XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The slot Redis computes for `name` (sent as UTF-8): the text between the first `{` and the next `}` if non-empty, else the whole name. */
export function redisKeySlot(name: string): number {
  const bytes = Buffer.from(name, 'utf8');
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) & 0x3fff;
  }
  return crc16(bytes) & 0x3fff;
}
