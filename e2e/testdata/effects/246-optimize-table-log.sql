--@ writes: log
OPTIMIZE TABLE {{log}}
