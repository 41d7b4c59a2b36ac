"""Object storage (a local folder or S3) and what is stored in it: clients' files, renders'
diagnoses.
"""
