"""Running what clients send: the template jail, templates and Markdown to HTML, the address
policy.
"""
