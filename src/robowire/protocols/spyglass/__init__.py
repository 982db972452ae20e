"""SpyGlass (ITM Lübeck wireless sensor network visualizer) packets, streams and files."""
