"""The quality gate pipeline: built-in gates on real tools, plugins, cache, digests."""
