"""A worker's state: tables in RocksDB written behind to their changelogs, the row cache, the feature view."""
