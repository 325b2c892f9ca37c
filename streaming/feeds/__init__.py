"""Event feeds for the tracker: simulator, live consumer instrumentation, cluster feed, producer partitioners."""
