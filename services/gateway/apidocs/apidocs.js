// Renders /openapi.json: routes grouped by tag, their parameters, bodies and answers, and
// every schema. Each value of the document becomes a text node (or an attribute set with
// setAttribute on an element this script made), never markup: no innerHTML anywhere.

const METHODS = ["get", "post", "put", "patch", "delete"];

// Children may be nested arrays at any depth (a body's parts, each a list of nodes): all
// are flattened, so no array is ever appended as its text ("[object HTMLDivElement]").
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === "") continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

// Text with `code` spans (the document's descriptions use them), still only text nodes.
function prose(text) {
  return String(text || "").split("`").map((part, i) => (i % 2 ? el("code", {}, part) : part));
}

// A longer description: paragraphs apart, and lines that start with "- " as a list (the
// error types and what each means), still only text nodes.
function paragraphs(text) {
  return String(text || "").split("\n\n").map((block) => {
    const lines = block.split("\n");
    if (lines.every((line) => line.startsWith("- "))) {
      return el("ul", {}, lines.map((line) => el("li", {}, prose(line.slice(2)))));
    }
    return el("p", {}, prose(block));
  });
}

function anchor(kind, name) {
  return `${kind}-${String(name).replace(/[^A-Za-z0-9_-]/g, "-")}`;
}

function refName(ref) {
  return ref.split("/").pop();
}

function limits(schema) {
  const said = [];
  const words = {
    minimum: "≥", maximum: "≤", exclusiveMinimum: ">", exclusiveMaximum: "<",
    minLength: "min length", maxLength: "max length", minItems: "min items",
    maxItems: "max items", pattern: "pattern", format: "format", default: "default",
  };
  for (const [key, word] of Object.entries(words)) {
    if (key in schema) said.push(`${word} ${JSON.stringify(schema[key])}`);
  }
  return said.length ? ` (${said.join(", ")})` : "";
}

// The type of `schema` as nodes: links for references, text for the rest.
function typeOf(schema) {
  if (!schema || typeof schema !== "object") return ["any"];
  if (schema.$ref) {
    const name = refName(schema.$ref);
    return [el("a", { href: `#${anchor("schema", name)}` }, name)];
  }
  const union = schema.anyOf || schema.oneOf;
  if (union) return union.flatMap((part, i) => (i ? [" | ", ...typeOf(part)] : typeOf(part)));
  if (schema.enum) return [`one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`];
  if (schema.type === "array") return ["array of ", ...typeOf(schema.items), limits(schema)];
  if (schema.type === "object" && !schema.properties) return ["object", limits(schema)];
  return [String(schema.type || "object"), limits(schema)];
}

function table(headings, rows) {
  const head = el("tr", {}, headings.map((h) => el("th", { scope: "col" }, h)));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, rows));
}

function parameters(operation) {
  const params = operation.parameters || [];
  if (!params.length) return null;
  const rows = params.map((p) =>
    el("tr", {},
      el("td", {}, el("code", {}, p.name)),
      el("td", {}, p.in),
      el("td", {}, p.required ? "yes" : "no"),
      el("td", {}, typeOf(p.schema)),
      el("td", {}, prose(p.description))));
  return [el("h3", {}, "Parameters"), table(["name", "in", "required", "type", "meaning"], rows)];
}

function shown(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return el("pre", {}, el("code", {}, text));
}

// The body's example, or each of its named examples under its summary.
function example(media) {
  if ("example" in media) return shown(media.example);
  return Object.entries(media.examples || {}).map(([name, named]) =>
    [el("p", { class: "example-name" }, named.summary || name), shown(named.value)]);
}

// The schema a reference names, and the non-null branch of an optional one.
function resolved(schema, doc) {
  let found = schema || {};
  for (let hops = 0; found.$ref && hops < 10; hops += 1) {
    found = ((doc.components || {}).schemas || {})[refName(found.$ref)] || {};
  }
  const branches = (found.anyOf || []).filter((b) => b.type !== "null");
  return branches.length === 1 ? resolved(branches[0], doc) : found;
}

// The fields of an object schema as a nested list: name, type, required, meaning, and
// the fields of each field that is an object or a list of objects (`items[].filename`).
function fields(schema, doc, depth = 0, seen = new Set()) {
  let shape = resolved(schema, doc);
  if (shape.type === "array") shape = resolved(shape.items, doc);
  const props = Object.entries(shape.properties || {});
  if (!props.length || depth > 4 || seen.has(shape)) return null;
  const inner = new Set(seen).add(shape);
  const required = new Set(shape.required || []);
  return el("ul", { class: "fields" }, props.map(([name, property]) =>
    el("li", {},
      el("code", { class: "field-name" }, name), " ", el("span", { class: "field-type" }, typeOf(property)),
      required.has(name) ? el("span", { class: "field-required" }, " required") : null,
      property.description ? el("span", { class: "field-meaning" }, " — ", prose(property.description)) : null,
      fields(property, doc, depth + 1, inner))));
}

function requestBody(operation, doc) {
  const body = operation.requestBody;
  if (!body) return null;
  const parts = Object.entries(body.content || {}).map(([kind, media]) =>
    el("div", { class: "body" },
      el("p", {}, el("code", {}, kind), ": ", typeOf(media.schema),
        body.required ? "" : " (optional)"),
      kind === "application/json" ? fields(media.schema, doc) : null,
      example(media)));
  return [el("h3", {}, "Body"), parts];
}

function responses(operation) {
  const rows = Object.entries(operation.responses || {}).map(([status, answer]) => {
    const content = Object.entries(answer.content || {}).flatMap(([kind, media], i) =>
      [i ? el("br") : null, el("code", {}, kind), " ", ...typeOf(media.schema)]);
    return el("tr", {},
      el("td", {}, status), el("td", {}, prose(answer.description)), el("td", {}, content));
  });
  return [el("h3", {}, "Answers"), table(["status", "meaning", "body"], rows)];
}

function operationView(method, path, operation, doc) {
  const secured = (operation.security || []).map((s) => Object.keys(s).join(", ")).join(", ");
  const summary = el("summary", {},
    el("span", { class: `method ${method}` }, method),
    el("span", { class: "path" }, path), " — ", operation.summary || "",
    secured ? el("span", { class: "lock" }, `(${secured})`) : null);
  return el("details", { id: anchor("op", operation.operationId || `${method}${path}`) },
    summary,
    operation.description ? el("p", {}, prose(operation.description)) : null,
    parameters(operation), requestBody(operation, doc), responses(operation));
}

function schemaView(name, schema) {
  const required = new Set(schema.required || []);
  const rows = Object.entries(schema.properties || {}).map(([field, property]) =>
    el("tr", {},
      el("td", {}, el("code", {}, field)),
      el("td", {}, typeOf(property)),
      el("td", {}, required.has(field) ? "yes" : "no"),
      el("td", {}, prose(property.description || property.title))));
  return el("details", { id: anchor("schema", name) },
    el("summary", {}, el("code", {}, name)),
    schema.description ? paragraphs(schema.description) : null,
    rows.length ? table(["field", "type", "required", "meaning"], rows) : el("p", {}, typeOf(schema)),
    schema.additionalProperties === false ? el("p", {}, "Unknown fields are refused.") : null);
}

function byTag(doc) {
  const groups = new Map((doc.tags || []).map((t) => [t.name, { tag: t, operations: [] }]));
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS.filter((m) => item[m])) {
      const name = (item[method].tags || ["other"])[0];
      if (!groups.has(name)) groups.set(name, { tag: { name }, operations: [] });
      groups.get(name).operations.push([method, path, item[method]]);
    }
  }
  return [...groups.values()].filter((g) => g.operations.length);
}

function schemes(doc) {
  const rows = Object.entries((doc.components || {}).securitySchemes || {}).map(([name, s]) =>
    el("tr", {},
      el("td", {}, el("code", {}, name)),
      el("td", {}, [s.type, s.scheme].filter(Boolean).join(" ")),
      el("td", {}, prose(s.description))));
  return el("section", { id: "auth" }, el("h2", {}, "Authentication"),
    table(["scheme", "kind", "meaning"], rows));
}

function render(doc) {
  const main = document.getElementById("api");
  const toc = document.getElementById("toc");
  const groups = byTag(doc);
  const schemas = Object.entries((doc.components || {}).schemas || {});
  const links = groups.map(({ tag }) =>
    el("li", {}, el("a", { href: `#${anchor("tag", tag.name)}` }, tag.name)));
  links.unshift(el("li", {}, el("a", { href: "#auth" }, "authentication")));
  links.push(el("li", {}, el("a", { href: "#schemas" }, "schemas")));
  toc.replaceChildren(el("ul", {}, links));
  const sections = groups.map(({ tag, operations }) =>
    el("section", { id: anchor("tag", tag.name) },
      el("h2", {}, tag.name),
      tag.description ? el("p", {}, prose(tag.description)) : null,
      operations.map(([method, path, op]) => operationView(method, path, op, doc))));
  const info = doc.info || {};
  main.replaceChildren(
    el("p", {}, prose(`${info.title || "API"} ${info.version || ""} — ${info.description || ""}`)),
    schemes(doc),
    ...sections,
    el("section", { id: "schemas" }, el("h2", {}, "Schemas"),
      schemas.map(([name, schema]) => schemaView(name, schema))));
}

async function main() {
  const main = document.getElementById("api");
  try {
    const answer = await fetch("/openapi.json", { headers: { Accept: "application/json" } });
    if (!answer.ok) throw new Error(`/openapi.json answered ${answer.status}`);
    render(await answer.json());
  } catch (error) {
    main.replaceChildren(el("p", { role: "alert" }, `Could not load the document: ${error}`));
  }
}

main();
