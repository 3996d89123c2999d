/** This process's CPU time (user + system, µs) from now until the returned function is called. */
export function startClientCpu(): () => number {
  const before = process.cpuUsage();
  return () => {
    const used = process.cpuUsage(before);
    return used.user + used.system;
  };
}
