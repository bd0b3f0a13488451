"""Keeping in touch with peers: the peer table, when to sync (pure), the scheduler, change feeds."""
