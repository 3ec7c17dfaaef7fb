"""The transaction core's read entry points, each over one open read view: a frame, a
page of frames, an event (TransactionCore opens the reader and hands it here)."""
