"""A Content-Security-Policy header read for what it means, as a browser reads it: which
sources each kind of fetch may use once the fallbacks to `default-src` are applied.

The gateway's pages (the console, `/docs`) are tested against what docs/console.md and
docs/security.md promise, not against the constant the code sends: a test comparing the
header with that constant passes whatever the policy says."""

from __future__ import annotations

from dataclasses import dataclass

FALLBACKS = {
    "script-src": ("default-src",),
    "style-src": ("default-src",),
    "img-src": ("default-src",),
    "connect-src": ("default-src",),
    "font-src": ("default-src",),
    "media-src": ("default-src",),
    "object-src": ("default-src",),
    "frame-src": ("child-src", "default-src"),
    "child-src": ("default-src",),
    "worker-src": ("child-src", "script-src", "default-src"),
    "manifest-src": ("default-src",),
}
"""Where a fetch directive that is absent takes its sources from (CSP level 3, in order).
Document directives (`base-uri`, `form-action`, `frame-ancestors`) have no fallback: absent,
they restrict nothing."""

UNSAFE = {"'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "'wasm-unsafe-eval'"}
WIDE = {"*", "http:", "https:", "data:", "blob:", "filesystem:"}
"""Sources that let a script come from anyone (a data: or blob: URL is made by the page)."""


@dataclass(frozen=True)
class Policy:
    directives: dict[str, tuple[str, ...]]

    def sources(self, name: str) -> set[str] | None:
        """The sources `name` allows, after its fallbacks; None when nothing restricts it."""
        for directive in (name, *FALLBACKS.get(name, ())):
            if directive in self.directives:
                return set(self.directives[directive])
        return None


def parse(header: str) -> Policy:
    """One policy's directives; a directive named twice fails (a browser ignores the second,
    so a test reading it would read what is not enforced)."""
    directives: dict[str, tuple[str, ...]] = {}
    for part in header.split(";"):
        words = part.split()
        if not words:
            continue
        name = words[0].lower()
        assert name not in directives, f"{name} twice in {header!r}"
        directives[name] = tuple(w.lower() if w.startswith("'") else w for w in words[1:])
    return Policy(directives)


def assert_strict(
    header: str, *, images: set[str], connects: set[str], closed_forms: bool = True
) -> Policy:
    """What the gateway's own pages promise: nothing loads unless named (`default-src
    'none'`); scripts and styles from this origin only, no inline code, no eval; no plugin
    object; workers from this origin only; no framing by anyone; no `<base>`; forms post
    nowhere (with `closed_forms`: a page that promises it); images and requests from
    exactly `images` and `connects`."""
    policy = parse(header)
    assert policy.directives.get("default-src") == ("'none'",), header
    for kind in ("script-src", "style-src"):
        sources = policy.sources(kind)
        assert sources == {"'self'"}, (kind, sources)
        assert not sources & (UNSAFE | WIDE), (kind, sources)
    assert policy.sources("object-src") == {"'none'"}, header
    assert policy.sources("worker-src") == {"'self'"}, header
    assert policy.directives.get("frame-ancestors") == ("'none'",), header
    assert policy.directives.get("base-uri") == ("'none'",), header
    if closed_forms:
        assert policy.directives.get("form-action") == ("'none'",), header
    assert policy.sources("img-src") == images, header
    assert policy.sources("connect-src") == connects, header
    assert policy.sources("frame-src") == {"'none'"}, header
    return policy
