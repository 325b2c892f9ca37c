"""Event feeds for the tracker: simulator, live consumer instrumentation, cluster feed, topic metadata watcher,
producer partitioners."""
