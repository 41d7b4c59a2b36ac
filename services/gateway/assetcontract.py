"""The route table's entries for stored assets (`assets.py`), and the multipart form of
`POST /jobs`: apart from `contract.py`, which merges them into `ROUTES`."""

from __future__ import annotations

from services.gateway import assetanswers, assets
from services.gateway.routedocs import Body, Param, Route, files_schema, page_params

ASSET_NAME = Param(
    "name",
    "path",
    {"type": "string", "minLength": 1},
    "the asset's name, `/` and all (`fonts/brand.woff2`)",
    required=True,
)

JOB_FILES = files_schema(
    "the job's files, each named by its filename as the page refers to it (`logo.png`, "
    "`fonts/brand.woff2`)",
    {
        "job": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": "the job, as the JSON body would be (the part named `job`)",
        }
    },
)
JOB_FILES["required"] = ["job"]
"""`POST /jobs` as `multipart/form-data`."""

JOB_FILES_EXAMPLE = {
    "job": '{"html": "<link rel=stylesheet href=style.css><img src=logo.png>"}',
    "files": ["(the bytes of style.css)", "(the bytes of logo.png)"],
}
TEMPLATE_FILES = files_schema(
    "the files the version bundles, each named by its filename as its pages refer to it",
    {
        "template": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": "the template, as the JSON body would be (the part named `template`)",
        }
    },
)
TEMPLATE_FILES["required"] = ["template"]
"""`POST /templates` as `multipart/form-data`."""

TEMPLATE_FILES_EXAMPLE = {
    "template": '{"name": "letter", "body": "<link rel=stylesheet href=style.css><p>{{ text }}"}',
    "files": ["(the bytes of style.css)"],
}
ASSETS_EXAMPLE = {"files": ["(the bytes of logo.png)", "(the bytes of fonts/brand.woff2)"]}

ERRORS = (400, 401, 403, 408, 413, 503)

ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/assets"): Route(
        "Store files as assets, each the next version of its name",
        "assets",
        {201: assetanswers.AssetsStored},
        ERRORS,
        body=Body(
            None, ASSETS_EXAMPLE, multipart=files_schema("the files, named by their filenames")
        ),
        description="`multipart/form-data`, one part per file. A name stored again with "
        "other bytes gets the next version, with the same bytes the same one (`new` false). "
        "Types are sniffed from the bytes; a name whose suffix promises a format the bytes "
        "are not is a 400. All or none; a 413 over the tenant's asset quota.",
    ),
    ("GET", "/assets"): Route(
        "List the tenant's assets by name, and what they use of its quota",
        "assets",
        {200: assetanswers.AssetPage},
        (400, 401, 403, 503),
        params=page_params(assets.MAX_LIST_LIMIT, assets.MAX_OFFSET),
    ),
    ("GET", "/assets/{name}"): Route(
        "Every version of one asset",
        "assets",
        {200: assetanswers.Asset},
        (401, 403, 404, 503),
        params=(ASSET_NAME,),
    ),
    ("DELETE", "/assets/{name}"): Route(
        "Delete every version of an asset",
        "assets",
        {200: assetanswers.AssetRemoved},
        (401, 403, 404, 503),
        params=(ASSET_NAME,),
        description="Its bytes go unless another asset or template of the tenant uses them; "
        "a job already accepted that names it fails (`asset_missing`).",
    ),
}

TAG: dict[str, str] = {"assets": "Files stored once and named by jobs, every version kept."}
