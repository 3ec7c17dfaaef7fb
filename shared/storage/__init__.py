"""The storage contract every store implements and every service writes through."""
