"""The names ``distributed.backend`` may take, in a module of its own so that the config can
check a name without importing the runtimes (which import the config)."""

# the keys of evohpo.runtime.backends.RUNTIMES, in its order
RUNTIME_NAMES = ("local", "ray")
