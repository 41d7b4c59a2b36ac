// What the console's template editor takes from CodeMirror 6, bundled into one ES module
// (services/gateway/console/codemirror.js) by build.mjs.
export { EditorState, Compartment } from "@codemirror/state";
export {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  drawSelection, highlightSpecialChars,
} from "@codemirror/view";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export { searchKeymap, highlightSelectionMatches } from "@codemirror/search";
export {
  syntaxHighlighting, defaultHighlightStyle, bracketMatching, indentOnInput, foldGutter,
} from "@codemirror/language";
export { lintGutter, setDiagnostics, forEachDiagnostic } from "@codemirror/lint";
export { html } from "@codemirror/lang-html";
export { json } from "@codemirror/lang-json";
