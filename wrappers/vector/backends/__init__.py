"""The backends of `ConcurrentVectorEnv`, one module each: `threads` (a shared pool, or one thread
per slot in `dedicated`), `processes` (worker processes) and `ray_actors` (Ray actors).
`hosts` is what the process and Ray backends share: which worker hosts which slot, and how a
worker runs the slots it hosts. `wrappers.vector.backend` names them in its table."""
