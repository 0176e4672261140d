// A form built from a tool's JSON Schema: a field per property (text,
// numbers, switches, choices, lists, nested groups), each with its
// description as help and checked before anything is sent. A part of a
// schema no field fits (alternatives, references, free-form objects) gets a
// JSON editor, checked against that part of the schema.
import { h } from "./common.js";

let serial = 0;
const nextId = (base) => `${base}-${++serial}`;

/** The one type a field is built for, or null when none fits. */
function typeOf(schema) {
  if (!schema || typeof schema !== "object") return null;
  let type = schema.type;
  if (Array.isArray(type)) {
    const real = type.filter((t) => t !== "null");
    type = real.length === 1 ? real[0] : null;
  }
  if (!type && schema.properties) type = "object";
  if (!type && schema.items) type = "array";
  if (!type && Array.isArray(schema.enum)) type = "enum";
  return type ?? null;
}

function nullable(schema) {
  return Array.isArray(schema?.type) && schema.type.includes("null");
}

/** Problems of `value` against `schema` (the common keywords), with paths. */
export function validate(schema, value, path = "arguments") {
  const problems = [];
  if (!schema || typeof schema !== "object" || schema === true) return problems;
  const kind = Array.isArray(value) ? "array" : value === null ? "null" : typeof value;
  const types = schema.type === undefined ? null : [].concat(schema.type);
  if (types) {
    const ok = types.some((t) =>
      t === kind || (t === "integer" && Number.isInteger(value)) || (t === "number" && kind === "number"));
    if (!ok) return [`${path} must be ${types.join(" or ")}`];
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((o) => JSON.stringify(o) === JSON.stringify(value))) {
    problems.push(`${path} must be one of ${schema.enum.map((o) => JSON.stringify(o)).join(", ")}`);
  }
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    problems.push(`${path} must be ${JSON.stringify(schema.const)}`);
  }
  if (kind === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) problems.push(`${path} needs at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${path} takes at most ${schema.maxLength} characters`);
    if (schema.pattern) {
      try { if (!new RegExp(schema.pattern, "u").test(value)) problems.push(`${path} must match ${schema.pattern}`); } catch (_) { /* a pattern the browser cannot read is the node's to check */ }
    }
  }
  if (kind === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${path} must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${path} must be at most ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) problems.push(`${path} must be above ${schema.exclusiveMinimum}`);
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) problems.push(`${path} must be below ${schema.exclusiveMaximum}`);
  }
  if (kind === "array") {
    if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${path} needs at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${path} takes at most ${schema.maxItems} items`);
    if (schema.items && typeof schema.items === "object") value.forEach((item, i) => problems.push(...validate(schema.items, item, `${path}[${i}]`)));
  }
  if (kind === "object") {
    for (const name of schema.required ?? []) if (!(name in value)) problems.push(`${path}.${name} is required`);
    const properties = schema.properties ?? {};
    for (const [name, item] of Object.entries(value)) {
      if (properties[name]) problems.push(...validate(properties[name], item, `${path}.${name}`));
      else if (schema.additionalProperties === false) problems.push(`${path}.${name} is not an argument of this tool`);
      else if (typeof schema.additionalProperties === "object") problems.push(...validate(schema.additionalProperties, item, `${path}.${name}`));
    }
  }
  return problems;
}

/** The label, help and error line every field has. */
function frame(options, control, { group = false } = {}) {
  const help = options.schema.description ? h("span", { class: "help", id: nextId("help") }, options.schema.description) : null;
  const error = h("span", { class: "error", id: nextId("error"), hidden: true });
  const title = [options.label, options.required ? h("span", { class: "required" }, " required") : null];
  const described = [help?.id, error.id].filter(Boolean).join(" ");
  if (control.matches("input, select, textarea")) control.setAttribute("aria-describedby", described);
  const wrapper = group
    ? h("fieldset", { class: "field" }, h("legend", {}, title), help, control, error)
    : h("div", { class: "field" }, h("label", { for: control.id }, title), help, control, error);
  return {
    element: wrapper,
    show(problems) {
      error.textContent = problems.join("; ");
      error.hidden = problems.length === 0;
      for (const input of wrapper.querySelectorAll(":scope > input, :scope > select, :scope > textarea")) {
        input.setAttribute("aria-invalid", problems.length ? "true" : "false");
      }
    },
  };
}

/**
 * A field for `schema`. Returns `{element, read}`; `read()` gives
 * `{present, value, problems}`: an empty optional field is not present.
 */
export function field(schema, { label, required = false }) {
  schema = schema && typeof schema === "object" ? schema : {};
  const options = { schema, label, required };
  const type = typeOf(schema);
  if (Array.isArray(schema.enum) && schema.enum.length) return choiceField(options);
  if (schema.anyOf || schema.oneOf || schema.allOf || schema.$ref) return jsonField(options);
  switch (type) {
    case "string": return textField(options);
    case "integer":
    case "number": return numberField(options, type);
    case "boolean": return booleanField(options);
    case "object": return schema.properties ? objectField(options) : jsonField(options);
    case "array": return arrayField(options);
    default: return jsonField(options);
  }
}

function finish(options, frameOf, read) {
  return {
    element: frameOf.element,
    // `quiet`: read without marking problems (to describe the call while
    // the person is still typing).
    read(quiet = false) {
      const outcome = read(quiet);
      if (outcome.present) outcome.problems.push(...validate(options.schema, outcome.value, options.label));
      else if (options.required) outcome.problems.push(`${options.label} is required`);
      if (!quiet) frameOf.show(outcome.problems);
      return outcome;
    },
  };
}

function textField(options) {
  const { schema } = options;
  const long = (schema.maxLength ?? 0) > 200 || schema.format === "textarea" || /text|content|body|markdown/i.test(options.label);
  const inputType = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[schema.format] ?? "text";
  const control = long
    ? h("textarea", { id: nextId("f"), rows: 4 })
    : h("input", { id: nextId("f"), type: inputType, autocomplete: "off" });
  if (schema.default !== undefined) control.value = String(schema.default);
  if (schema.examples?.length) control.placeholder = String(schema.examples[0]);
  const framed = frame(options, control);
  return finish(options, framed, () => {
    let value = control.value;
    if (inputType === "datetime-local" && value) value = new Date(value).toISOString();
    if (value === "") return { present: false, value: undefined, problems: [] };
    return { present: true, value, problems: [] };
  });
}

function numberField(options, type) {
  const { schema } = options;
  const control = h("input", {
    id: nextId("f"), type: "number", inputmode: type === "integer" ? "numeric" : "decimal",
    step: type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum,
  });
  if (schema.default !== undefined) control.value = String(schema.default);
  const framed = frame(options, control);
  return finish(options, framed, () => {
    const text = control.value.trim();
    if (text === "") {
      // A browser empties a number field it cannot read.
      return control.validity.badInput
        ? { present: true, value: NaN, problems: [`${options.label} is not a number`] }
        : { present: false, value: undefined, problems: [] };
    }
    const value = Number(text);
    const problems = [];
    if (!Number.isFinite(value)) problems.push(`${options.label} is not a number`);
    else if (type === "integer" && !Number.isInteger(value)) problems.push(`${options.label} must be a whole number`);
    return { present: true, value, problems };
  });
}

function booleanField(options) {
  const control = h("input", { id: nextId("f"), type: "checkbox" });
  control.checked = options.schema.default === true;
  const framed = frame(options, control);
  framed.element.classList.add("check");
  // An optional switch left alone is not sent, so the tool's default holds.
  let touched = options.required || options.schema.default !== undefined;
  control.addEventListener("change", () => { touched = true; });
  return finish(options, framed, () => ({ present: touched, value: control.checked, problems: [] }));
}

function choiceField(options) {
  const { schema } = options;
  const control = h("select", { id: nextId("f") });
  if (!options.required || schema.default === undefined) control.append(h("option", { value: "" }, options.required ? "choose…" : "(not set)"));
  schema.enum.forEach((option, i) => {
    control.append(h("option", { value: String(i) }, typeof option === "string" ? option : JSON.stringify(option)));
  });
  const preset = schema.enum.findIndex((o) => JSON.stringify(o) === JSON.stringify(schema.default));
  if (preset >= 0) control.value = String(preset);
  const framed = frame(options, control);
  return finish(options, framed, () =>
    control.value === ""
      ? { present: false, value: undefined, problems: [] }
      : { present: true, value: schema.enum[Number(control.value)], problems: [] });
}

function objectField(options) {
  const { schema } = options;
  const required = new Set(schema.required ?? []);
  const children = Object.entries(schema.properties).map(([name, property]) => ({
    name, ...field(property, { label: property?.title ?? name, required: required.has(name) }),
  }));
  const body = h("div", { class: "group" }, children.map((c) => c.element));
  const framed = frame(options, body, { group: true });
  return finish(options, framed, (quiet) => {
    const value = {};
    const problems = [];
    let any = false;
    for (const child of children) {
      const outcome = child.read(quiet);
      if (outcome.problems.length) problems.push(...outcome.problems);
      if (outcome.present) { value[child.name] = outcome.value; any = true; }
    }
    // An optional group left empty is not sent; its own required fields
    // only count once something in it is filled.
    if (!any && !options.required) return { present: false, value: undefined, problems: [] };
    return { present: true, value, problems };
  });
}

function arrayField(options) {
  const { schema } = options;
  const itemSchema = schema.items && typeof schema.items === "object" && !Array.isArray(schema.items) ? schema.items : {};
  const list = h("div", { class: "items" });
  const items = [];
  const add = () => {
    const item = field(itemSchema, { label: `${options.label} item ${items.length + 1}`, required: true });
    const remove = h("button", { type: "button", class: "link", "aria-label": `remove ${options.label} item` }, "remove");
    const row = h("div", { class: "item" }, item.element, remove);
    const entry = { item, row };
    remove.addEventListener("click", () => { items.splice(items.indexOf(entry), 1); row.remove(); });
    items.push(entry);
    list.append(row);
    row.querySelector("input, select, textarea")?.focus();
  };
  const more = h("button", { type: "button", class: "link" }, `add ${options.label} item`);
  more.addEventListener("click", add);
  const body = h("div", {}, list, more);
  const framed = frame(options, body, { group: true });
  return finish(options, framed, (quiet) => {
    const problems = [];
    const value = items.map(({ item }) => {
      const outcome = item.read(quiet);
      problems.push(...outcome.problems);
      return outcome.value;
    });
    if (!value.length && !options.required) return { present: false, value: undefined, problems };
    return { present: true, value, problems };
  });
}

function jsonField(options) {
  const control = h("textarea", { id: nextId("f"), rows: 4, spellcheck: "false", class: "json" });
  if (options.schema.default !== undefined) control.value = JSON.stringify(options.schema.default, null, 2);
  const framed = frame(options, control);
  const hint = h("span", { class: "help" }, "JSON, checked against the tool's schema");
  framed.element.insertBefore(hint, control);
  return finish(options, framed, () => {
    const text = control.value.trim();
    if (!text) return { present: false, value: undefined, problems: [] };
    try {
      return { present: true, value: JSON.parse(text), problems: [] };
    } catch (e) {
      return { present: true, value: undefined, problems: [`${options.label} is not JSON: ${e.message}`] };
    }
  });
}

/**
 * The whole form of a tool's input schema inside `container`. Returns
 * `read(quiet)`: `{value, problems}` with the arguments object; problems
 * are marked on their fields unless `quiet`.
 */
export function buildForm(container, schema) {
  container.replaceChildren();
  const usable = schema && typeof schema === "object" && (typeOf(schema) === "object" || !schema.type);
  if (usable && schema.properties && !schema.anyOf && !schema.oneOf && !schema.$ref) {
    const required = new Set(schema.required ?? []);
    const fields = Object.entries(schema.properties).map(([name, property]) => ({
      name, ...field(property, { label: property?.title ?? name, required: required.has(name) }),
    }));
    container.append(...fields.map((f) => f.element));
    return (quiet = false) => {
      const value = {};
      const problems = [];
      for (const f of fields) {
        const outcome = f.read(quiet);
        problems.push(...outcome.problems);
        if (outcome.present) value[f.name] = outcome.value;
      }
      if (!problems.length) problems.push(...validate(schema, value));
      return { value, problems };
    };
  }
  if (usable && !schema.properties && !schema.anyOf && !schema.oneOf && !schema.$ref && !schema.additionalProperties) {
    container.append(h("p", { class: "hint" }, "This tool takes no arguments."));
    return () => ({ value: {}, problems: [] });
  }
  // A schema the form cannot lay out: the arguments as JSON, checked.
  const editor = jsonField({ schema: schema ?? {}, label: "arguments", required: true });
  container.append(editor.element);
  return (quiet = false) => {
    const outcome = editor.read(quiet);
    if (outcome.present && (typeof outcome.value !== "object" || outcome.value === null || Array.isArray(outcome.value))) {
      outcome.problems.push("arguments must be a JSON object");
    }
    return { value: outcome.value ?? {}, problems: outcome.problems };
  };
}
