# For LayeringCheck.*: `high` may use `low`; `low` may use nothing.
set(LOCKSTEP_MAY_USE_low ";")
set(LOCKSTEP_MAY_USE_high "low;")
