-- many: runs one script once per call of a chunk, in one EVALSHA. The
-- script's source is put inside the function one(KEYS, ARGV) above this
-- driver (see Script.Many in internal/quorum), so every call sees its own
-- KEYS and ARGV exactly as if it had been sent alone.
--
-- KEYS    the calls' keys, one call after the other
-- ARGV[1] n, the number of calls
-- then, per call: its number of keys, its number of args, its args
--
-- Returns one answer per call, in order. A call that fails (an error reply
-- returned, or a redis.call or Lua error raised) answers that error in its
-- place; the calls after it still run, and what it wrote before it failed
-- stays written, as it would alone. A nil answer is false (a nil reply).
local n = tonumber(ARGV[1])
local ki, ai = 1, 2
local out = {}
for i = 1, n do
  local nk, na = tonumber(ARGV[ai]), tonumber(ARGV[ai + 1])
  ai = ai + 2
  local k, a = {}, {}
  for j = 1, nk do
    k[j] = KEYS[ki]
    ki = ki + 1
  end
  for j = 1, na do
    a[j] = ARGV[ai]
    ai = ai + 1
  end
  local ok, r = pcall(one, k, a)
  if not ok then
    if type(r) == 'table' and r.err then
      r = {err = r.err}
    else
      r = {err = tostring(r)}
    end
  elseif r == nil then
    r = false
  end
  out[i] = r
end
return out
