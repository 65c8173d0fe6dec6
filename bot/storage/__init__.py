"""Storage: every Redis key (keys.py), one module per data area, Lua scripts in lua/."""
