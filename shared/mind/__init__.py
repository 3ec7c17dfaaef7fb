"""The Mind's record schema and its typed view over storage, shared by every service
that reads projections (transaction writes them; recall and encoding read them)."""
