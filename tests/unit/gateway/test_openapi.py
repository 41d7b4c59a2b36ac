"""The OpenAPI document, built from the gateway's router and its Structs (no server).

Verifies: the document is valid OpenAPI 3.1 (`openapi-spec-validator`); its operations
are exactly the router's routes (HEAD aside) and the entries of `contract.ROUTES`, and a
route without an entry stops the build naming it; paths use the documentation's names, and
every route the documentation names (docs/api.md's table, docs/tenants.md's admin API) is
in it; each request body's example is a request
the gateway accepts; the routes open without a key are exactly the public ones, the admin
routes take the admin key; answers encode as the handlers always answered (fields left
out where they were, no extra fields in any schema).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp import web
from openapi_spec_validator import OpenAPIV31SpecValidator

from services.core.model.status import JobStatus
from services.core.runtime.settings import Settings
from services.gateway import answers, contract, jobanswers, openapi
from services.gateway.app import init_app
from services.gateway.requests import parse_batch, parse_batch_lines, parse_job
from services.gateway.templaterequests import parse_template
from tests.conftest import SERVER_KEY

DOCS = Path(__file__).parents[3] / "docs"
ROUTE = r"`(GET|POST|PATCH|DELETE) (/[^`?\s]*)"
"""A route as the documentation names one: `GET /jobs/{id}`."""
GOTENBERGS_OWN = {"gotenberg.md"}
"""Pages naming Gotenberg's routes as Gotenberg does (`/forms/pdfengines/*`, its `/debug`)."""
OPEN = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/files/{key}"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/{file}"),
    ("GET", "/console"),
    ("GET", "/console/{file}"),
    ("GET", "/health"),  # Gotenberg's, open as Gotenberg's are
    ("GET", "/version"),
    ("POST", "/forms/libreoffice/convert"),  # answers 501 to anyone
}
GOTENBERG = ("/forms/", "/health", "/version")
"""Gotenberg-compatible paths: their errors are plain text, as Gotenberg's are."""
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def app() -> web.Application:
    return init_app(Settings(server_key=SERVER_KEY))


@pytest.fixture(scope="module")
def doc(app: web.Application) -> dict[str, Any]:
    return openapi.document(app, "http://localhost:8080")


def operations_of(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def test_the_document_is_valid_openapi_3_1(doc):
    assert doc["openapi"].startswith("3.1")
    OpenAPIV31SpecValidator(doc).validate()


def test_the_document_has_exactly_the_routes_the_router_serves(app, doc):
    served = {
        (route.method, contract.public_path(route.resource.canonical))
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    assert set(operations_of(doc)) == served
    assert set(contract.ROUTES) == served  # no entry left over from a route that went


def test_a_route_without_an_entry_stops_the_build_naming_it():
    app = init_app(Settings(server_key=SERVER_KEY))
    app.router.add_get("/jobs/{job_id}/secret-plans", openapi.get_page)
    with pytest.raises(openapi.UndocumentedRoute, match=re.escape("GET /jobs/{id}/secret-plans")):
        openapi.document(app, "http://localhost:8080")


def test_paths_are_named_as_the_documentation_names_them(doc):
    assert re.findall(ROUTE, (DOCS / "api.md").read_text()), "docs/api.md's table is gone"
    pages = [page for page in DOCS.glob("*.md") if page.name not in GOTENBERGS_OWN]
    found = [route for page in pages for route in re.findall(ROUTE, page.read_text())]
    listed = {(method, path) for method, path in found if "<" not in path}  # not examples
    assert listed <= set(operations_of(doc))
    names = {name for path in doc["paths"] for name in re.findall(r"\{(\w+)\}", path)}
    assert names <= {"id", "key", "key_id", "file", "name"}


def test_every_path_parameter_is_declared(doc):
    for (method, path), operation in operations_of(doc).items():
        declared = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
        assert declared == set(re.findall(r"\{(\w+)\}", path)), (method, path)


def test_request_body_examples_are_requests_the_gateway_accepts(doc):
    operations = operations_of(doc)

    def example(method: str, path: str, media: str = "application/json") -> Any:
        found = operations[(method, path)]["requestBody"]["content"][media]
        return found["example"] if "example" in found else found["examples"]["default"]["value"]

    jobs = operations[("POST", "/jobs")]["requestBody"]["content"]["application/json"]
    assert set(jobs["examples"]) == {"default", "markdown", "template_name"}
    for named in jobs["examples"].values():
        parse_job(msgspec.json.encode(named["value"]))
    parse_batch(msgspec.json.encode(example("POST", "/batches")), 10)
    lines = example("POST", "/batches", "application/x-ndjson")
    assert len(parse_batch_lines(lines.encode(), 10).items) == 2
    parse_template(msgspec.json.encode(example("POST", "/templates")))
    for key, route in contract.ROUTES.items():
        if route.body is not None and route.body.struct is not None:
            msgspec.convert(example(*key), route.body.struct)
    multipart = example("POST", "/jobs", "multipart/form-data")
    parse_job(multipart["job"].encode())


def test_only_the_public_routes_are_open_and_admin_routes_take_the_admin_key(doc):
    for (method, path), operation in operations_of(doc).items():
        if (method, path) in OPEN:
            assert operation["security"] == [], path
        elif path.startswith("/admin/"):
            assert operation["security"] == [{"adminKey": []}], path
        else:
            assert operation["security"] == [{"apiKey": []}], path
            assert {"401", "403"} <= set(operation["responses"]), path
    schemes = doc["components"]["securitySchemes"]
    assert schemes["apiKey"] == schemes["apiKey"] | {"type": "http", "scheme": "bearer"}


def test_each_route_names_the_scope_its_guard_checks(doc):
    """The scope comes from the handler's own guard: what the document says is what
    the gateway enforces."""
    operations = operations_of(doc)
    expected = {
        ("POST", "/jobs"): "jobs:write",
        ("GET", "/jobs/{id}/stream"): "jobs:read",
        ("POST", "/templates"): "templates:write",
        ("GET", "/usage"): "usage:read",
        ("POST", "/webhook-secrets"): "webhooks:write",
    }
    for key, scope in expected.items():
        assert operations[key]["description"].startswith(f"Needs the scope `{scope}`."), key
    for (method, path), operation in operations.items():
        needs = "Needs the scope" in operation["description"]
        assert needs == (operation["security"] == [{"apiKey": []}]), (method, path)


def test_every_error_status_answers_the_shared_error_body(doc):
    for (_, path), operation in operations_of(doc).items():
        for status, response in operation["responses"].items():
            if int(status) < 400 or path == "/readyz" or path.startswith(GOTENBERG):
                continue
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, status)


def test_answers_refuse_extra_fields_in_their_schemas(doc):
    schemas = doc["components"]["schemas"]
    for name in ("Job", "Batch", "ErrorBody", "TenantCreated", "Template", "WebhookAttempt"):
        assert schemas[name]["additionalProperties"] is False, name


def test_answers_encode_as_the_handlers_always_answered():
    def encoded(answer: msgspec.Struct) -> Any:
        return msgspec.json.decode(answers.respond(answer).body)  # type: ignore[arg-type]

    queued = jobanswers.Job(id="j1", status=JobStatus.QUEUED, attempts=0)
    assert encoded(queued) == {"id": "j1", "status": "queued", "attempts": 0}
    error = answers.ErrorBody(error=answers.ErrorDetail(type="validation", message="m"))
    assert encoded(error) == {"error": {"type": "validation", "message": "m"}}
    chosen = answers.SecretCreated(id="whs_1", created_at="2026-11-03T10:00:00+00:00")
    assert "secret" not in encoded(chosen)
    removed = jobanswers.JobRemoved(id="j1", status=JobStatus.CANCELLED)
    assert encoded(removed) == {"id": "j1", "status": "cancelled", "url": None}


def test_every_schema_has_a_plain_name(doc):
    """Two Structs of one name get module-qualified names from msgspec, which /docs and
    generated clients handle badly: each schema is named by its class alone."""
    names = list(doc["components"]["schemas"])
    assert [n for n in names if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", n)] == []


def test_every_answer_to_a_known_tenant_key_names_its_rate_limit_headers(doc):
    """`RateLimit-*` on each answer of a route that takes a tenant's key, except the 401 of
    a key that is not known; none on admin or open routes."""
    names = {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}
    assert set(doc["components"]["headers"]) == names
    for (method, path), operation in operations_of(doc).items():
        tenant = operation["security"] == [{"apiKey": []}]
        for status, response in operation["responses"].items():
            named = names & set(response.get("headers", {}))
            assert named == (names if tenant and status != "401" else set()), (method, path, status)
