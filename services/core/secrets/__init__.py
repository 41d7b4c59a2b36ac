"""Keys and signatures: API keys, sealed values, webhook signatures. Imports nothing of the
project's.
"""
