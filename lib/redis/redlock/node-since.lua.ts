/**
 * Lua: sets the local `since`, the node-clock ms from which this node has kept its data, for the
 * recovery rule (redlock-recovery in docs/design.md). Expects the locals `now_ms` (node clock) and
 * `recovery` (ms, above 0). The acquire script and the health probe share it, so the check never
 * judges a node by another rule than the vote does.
 *
 * A missing marker (`markerKey`, a Lua expression) means the node started empty: it is written now,
 * and the node votes `recovery` ms later. Writing it from a probe is as safe as from an acquire: the
 * node is empty at that moment, so it cannot have forgotten a lock granted after it.
 */
export const nodeSinceLua = (markerKey: string): string => `  local since = tonumber(redis.call('GET', ${markerKey}) or '')
  if not since then
    since = now_ms
    redis.call('SET', ${markerKey}, string.format('%.0f', now_ms))
  end
  -- A restart from an older snapshot (RDB, or an AOF fsynced every second) brings the marker back
  -- without the locks granted after it: only the process's own uptime tells such a restart. Counted
  -- from the latest moment the process can have started (whole seconds). A server that refuses INFO
  -- to scripts leaves the marker alone to decide.
  -- INFO builds and this script scans a 1.5 kB text (about 8 µs of the server's CPU); LASTSAVE is an
  -- integer that bounds the start from above: Redis sets it to its clock (whole seconds) as it starts
  -- and only raises it. Once that bound, plus the second it truncates, is \`recovery\` ms behind, the
  -- uptime cannot change the vote, so INFO runs only within \`recovery\` of a start or a save.
  local saved = redis.pcall('LASTSAVE')
  if type(saved) ~= 'number' or (saved + 1) * 1000 + recovery > now_ms then
    local info = redis.pcall('INFO', 'server')
    local at = type(info) == 'string' and string.find(info, 'uptime_in_seconds:', 1, true)
    local uptime = at and tonumber(string.match(info, '^%d+', at + 18))
    if uptime and now_ms - uptime * 1000 > since then since = now_ms - uptime * 1000 end
  end
`;

/**
 * Lua: sets the local `recovery_left`, the ms this node still gives no votes by the recovery rule above (0 when
 * it votes, and at once when `recoveryArg`, a Lua expression, is '0': the rule is off). For the scripts that
 * need only that answer (release, isLocked, the health probe); the acquire keeps its clock for the fence too.
 */
export const recoveryLeftLua = (markerKey: string, recoveryArg: string): string => `local recovery_left = 0
if ${recoveryArg} ~= '0' then
  local recovery = tonumber(${recoveryArg})
  local clock = redis.call('TIME')
  local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
${nodeSinceLua(markerKey)}  recovery_left = math.max(0, since + recovery - now_ms)
end
`;
