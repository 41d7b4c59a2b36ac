"""`pressroom backup` and `pressroom restore`: everything Pressroom keeps, into one folder
and back (docs/operations.md, "Backup, restore and disaster recovery").

    postgres.py   PostgreSQL, with pg_dump and pg_restore
    streams.py    every JetStream stream with its consumers, with JetStream's snapshots
    files.py      the stored files, through the configured storage
    main.py       the commands: the order of the parts, the manifest, the rebuild
"""
