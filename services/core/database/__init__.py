"""PostgreSQL: the pool and migrations, the read model's queries, tenants, stored templates and
assets.
"""
