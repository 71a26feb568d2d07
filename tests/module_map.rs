//! The code map stays true: no module of the library depends, directly or through others, on a module that
//! depends back on it — neither between files (`coordinator/hub.rs` ↔ `coordinator/status.rs`) nor between the
//! top-level modules (`grpc` ↔ `coordinator`). Read from the `use` lines and `crate::…`/`super::…` paths of
//! `src/`, without test code (inline `mod tests`, and modules declared under `#[cfg(test)]`).
//!
//! A module's declaration and re-exports of its own children are containment, not dependency; a path through a
//! re-export (`crate::dag::Graph`) counts as a dependency on the child that defines it (`dag::graph`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`dag::graph`; `` for the crate root) → the modules it uses.
type Edges = BTreeMap<String, BTreeSet<String>>;

struct Module {
    path: String,
    /// Source without comments, string literals and test code.
    code: String,
}

fn module_path(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// Drops comments, the contents of string and char literals, and `#[cfg(test)]` items (an inline `mod tests
/// { … }` or a `mod x;` declaration, whose names are returned so their files are skipped too).
fn strip(source: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(source.len());
    let bytes: Vec<char> = source.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < bytes.len() && bytes[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < bytes.len() && !(bytes[i] == '*' && bytes[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || (next == Some('#') && !prev_is_ident(&bytes, i))) {
            // Raw string r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while bytes.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if bytes.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= bytes.len() {
                    break;
                }
                if bytes[j] == '"' && (0..hashes).all(|k| bytes.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                if bytes[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && is_char_literal(&bytes, i) {
            i += 1;
            while i < bytes.len() && bytes[i] != '\'' {
                if bytes[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    remove_test_items(&out)
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `'a'`, `'\n'`, `'\u{..}'` — not a lifetime `'a`.
fn is_char_literal(chars: &[char], i: usize) -> bool {
    matches!((chars.get(i + 1), chars.get(i + 2)), (Some('\\'), _) | (Some(_), Some('\'')))
}

fn remove_test_items(code: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(code.len());
    let mut test_modules = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        // The item: up to its `;` or its balanced `{ … }`, whichever comes first.
        let semicolon = after.find(';');
        let brace = after.find('{');
        let end = match (semicolon, brace) {
            (Some(s), Some(b)) if s < b => s + 1,
            (Some(s), None) => s + 1,
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = after.len();
                for (k, ch) in after[b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => after.len(),
        };
        let item = &after[..end];
        let words: Vec<&str> =
            item.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        if let Some(k) = words.iter().position(|w| *w == "mod")
            && item.trim_end().ends_with(';')
            && let Some(name) = words.get(k + 1)
        {
            test_modules.push(name.to_string());
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    (out, test_modules)
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The library's modules (the binary's `main.rs` and `cli/` are left out: nothing in the library uses them).
fn library(src: &Path) -> Vec<Module> {
    let mut modules = Vec::new();
    let mut test_only: BTreeSet<String> = BTreeSet::new();
    let all = files(src);
    for file in &all {
        let path = module_path(src, file);
        if path == "main" || path == "cli" || path.starts_with("cli::") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (code, tests) = strip(&text);
        for name in tests {
            test_only.insert(if path.is_empty() { name } else { format!("{path}::{name}") });
        }
        modules.push(Module { path, code });
    }
    modules.retain(|m| !test_only.iter().any(|t| m.path == *t || m.path.starts_with(&format!("{t}::"))));
    modules
}

/// The use trees of `code`, flattened to full paths (`use a::{b, c::d}` → `a::b`, `a::c::d`).
fn use_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        expand("", after[..end].trim(), &mut out);
        rest = &after[end..];
    }
    out
}

fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut start = 0;
    while let Some(found) = text[start..].find(word) {
        let at = start + found;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if boundary(before) && boundary(after) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        start = at + word.len();
    }
    None
}

fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    let join = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { format!("{a}::{b}") };
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = join(prefix, head);
        let mut depth = 0;
        let mut piece = String::new();
        for c in inner.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&base, &piece, out);
                    piece.clear();
                    continue;
                }
                _ => {}
            }
            piece.push(c);
        }
        expand(&base, &piece, out);
    } else if !tree.is_empty() {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        let path = path.trim_end_matches("::*");
        if path == "self" {
            out.push(prefix.to_string());
        } else {
            out.push(join(prefix, path));
        }
    }
}

/// Paths written inline: `crate::a::b`, `super::x`.
fn inline_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(at) = rest.find(start) {
            let before = rest[..at].chars().next_back();
            let tail: String =
                rest[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                out.push(tail.trim_end_matches(':').to_string());
            }
            rest = &rest[at + start.len()..];
        }
    }
    out
}

/// `pub use child::{A, B}` in a module: name → the child module that defines it.
fn re_exports(module: &Module, known: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = module.code.as_str();
    while let Some(at) = rest.find("pub use ") {
        let after = &rest[at + "pub use ".len()..];
        let Some(end) = after.find(';') else { break };
        let mut paths = Vec::new();
        expand("", &after[..end], &mut paths);
        for path in paths {
            let Some((head, name)) = path.rsplit_once("::") else { continue };
            let head = head.trim_start_matches("self::");
            let child = if module.path.is_empty() { head.to_string() } else { format!("{}::{head}", module.path) };
            if known.contains(&child) {
                out.insert(name.to_string(), child);
            }
        }
        rest = &after[end..];
    }
    out
}

/// The module a path names, as the longest known module prefix, followed through one re-export.
fn resolve(
    from: &str,
    path: &str,
    known: &BTreeSet<String>,
    exports: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = match segments.first().copied() {
        Some("crate") => {
            segments.remove(0);
            Vec::new()
        }
        Some("super") | Some("self") => {
            let mut base: Vec<String> = from.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            while let Some(first) = segments.first().copied() {
                match first {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segments.remove(0);
            }
            base
        }
        _ => return None,
    };
    let mut module = base.join("::");
    for segment in segments {
        base.push(segment.to_string());
        let candidate = base.join("::");
        if known.contains(&candidate) {
            module = candidate;
            continue;
        }
        if let Some(child) = exports.get(&module).and_then(|e| e.get(segment)) {
            module = child.clone();
        }
        break;
    }
    Some(module)
}

fn edges(modules: &[Module]) -> Edges {
    let known: BTreeSet<String> = modules.iter().map(|m| m.path.clone()).collect();
    let exports: BTreeMap<String, BTreeMap<String, String>> =
        modules.iter().map(|m| (m.path.clone(), re_exports(m, &known))).collect();
    let mut edges = Edges::new();
    for module in modules {
        let targets = edges.entry(module.path.clone()).or_default();
        for path in use_paths(&module.code).into_iter().chain(inline_paths(&module.code)) {
            let Some(target) = resolve(&module.path, &path, &known, &exports) else { continue };
            let contains = module.path.is_empty() || target.starts_with(&format!("{}::", module.path));
            if target != module.path && !contains {
                targets.insert(target);
            }
        }
    }
    edges
}

/// The top-level module of each edge (`dag::graph` → `dag`), without edges inside one top-level module.
fn top_level(edges: &Edges) -> Edges {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut out = Edges::new();
    for (from, targets) in edges {
        let entry = out.entry(top(from)).or_default();
        for target in targets {
            if top(target) != top(from) && !target.is_empty() {
                entry.insert(top(target));
            }
        }
    }
    out
}

/// Each cycle as a path `a → b → a` (one per strongly connected component of more than one module).
fn cycles(edges: &Edges) -> Vec<String> {
    // Tarjan's strongly connected components.
    struct State<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[w].min(s.low[v]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.index[w].min(s.low[v]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.components.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state
        .components
        .iter()
        .map(|component| {
            let members: BTreeSet<&str> = component.iter().copied().collect();
            // One cycle inside the component, by a walk that stays in it, for the message.
            let start = *members.iter().next().expect("non-empty");
            let mut walk = vec![start];
            let mut seen = BTreeSet::from([start]);
            let mut at = start;
            loop {
                let next = edges[at]
                    .iter()
                    .map(String::as_str)
                    .find(|n| members.contains(n) && (!seen.contains(n) || *n == start))
                    .or_else(|| edges[at].iter().map(String::as_str).find(|n| members.contains(n)))
                    .expect("a member of a component has an edge inside it");
                walk.push(next);
                if seen.contains(next) {
                    break;
                }
                seen.insert(next);
                at = next;
            }
            let name = |m: &str| if m.is_empty() { "crate".to_string() } else { m.to_string() };
            format!("{} (component: {})", walk.iter().map(|m| name(m)).collect::<Vec<_>>().join(" → "), {
                members.iter().map(|m| name(m)).collect::<Vec<_>>().join(", ")
            })
        })
        .collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_two_files_of_the_library_depend_on_each_other() {
    let found = cycles(&edges(&library(&src())));
    assert!(found.is_empty(), "module cycles between files:\n  {}", found.join("\n  "));
}

#[test]
fn the_top_level_modules_form_layers() {
    let found = cycles(&top_level(&edges(&library(&src()))));
    assert!(found.is_empty(), "module cycles between top-level modules:\n  {}", found.join("\n  "));
}

/// The check itself: a tree with a cycle put back (through a re-export, a `super::` path and an inline path)
/// fails, and the same tree without it passes.
#[test]
fn the_check_finds_a_cycle_that_is_added_back() {
    let dir = std::env::temp_dir().join(format!("ferry-module-map-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let write = |path: &str, text: &str| {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write("lib.rs", "pub mod coordinator;\npub mod grpc;\n#[cfg(test)]\nmod fuzz;\n");
    write("coordinator/mod.rs", "pub mod hub;\npub mod status;\npub use hub::Hub;\n");
    write("coordinator/hub.rs", "use super::status::Status;\npub struct Hub;\n");
    write(
        "coordinator/status.rs",
        "/// Not `crate::coordinator::Hub`.\npub struct Status;\n#[cfg(test)]\nmod tests { use crate::coordinator::Hub; }\n",
    );
    write("grpc/mod.rs", "pub mod server;\n");
    write(
        "grpc/server.rs",
        "use crate::coordinator::{hub::Hub, status::{self}};\nfn f() { let _ = \"crate::grpc\"; }\n",
    );
    write("fuzz.rs", "use crate::grpc::server;\n");
    let modules = library(&dir);
    assert!(cycles(&edges(&modules)).is_empty(), "{:?}", cycles(&edges(&modules)));
    assert!(cycles(&top_level(&edges(&modules))).is_empty());

    write("coordinator/status.rs", "pub struct Status;\nfn hub() -> crate::coordinator::Hub { todo!() }\n");
    let found = cycles(&edges(&library(&dir)));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("coordinator::hub") && found[0].contains("coordinator::status"), "{found:?}");

    write("coordinator/status.rs", "pub struct Status;\n");
    write("coordinator/hub.rs", "use super::status::Status;\npub struct Hub;\nuse crate::grpc::server as s;\n");
    let found = cycles(&top_level(&edges(&library(&dir))));
    assert_eq!(found, ["coordinator → grpc → coordinator (component: coordinator, grpc)"]);
    let _ = std::fs::remove_dir_all(&dir);
}
