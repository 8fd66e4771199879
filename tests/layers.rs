//! Imports flow one way: every top-level module of `src/` sits in one layer of the table in `docs/architecture.md`
//! ("Layers"), and may use only modules of its own layer or of the layers below, with no cycle among the modules of
//! one layer. Read from the sources themselves (`crate::` paths and `super::` paths that climb to the crate root,
//! outside comments), so the table and the code cannot part.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → layer, from the table under "## Layers" in `docs/architecture.md`: rows `| n | `a`, `b` | ... |`.
fn layers(doc: &str) -> BTreeMap<String, usize> {
    let section = doc.split("\n## Layers").nth(1).expect("a 'Layers' section in docs/architecture.md");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut layers = BTreeMap::new();
    for row in section.lines().filter(|line| line.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(Ok(layer)) = cells.get(1).map(|cell| cell.parse::<usize>()) else { continue };
        for module in cells[2].split(',').map(|name| name.trim().trim_matches('`')) {
            assert!(layers.insert(module.to_owned(), layer).is_none(), "{module} is in two layers");
        }
    }
    layers
}

/// The code of a file without its comments (`//` to the end of a line, outside string literals).
fn code(source: &str) -> String {
    let mut kept = String::new();
    for line in source.lines() {
        let mut in_string = false;
        let mut previous = ' ';
        let mut end = line.len();
        for (at, character) in line.char_indices() {
            match character {
                '"' if previous != '\\' => in_string = !in_string,
                '/' if !in_string && previous == '/' => {
                    end = at - 1;
                    break;
                }
                _ => {}
            }
            previous = character;
        }
        kept.push_str(&line[..end]);
        kept.push('\n');
    }
    kept
}

/// The top-level modules `source` (the file at `path`, inside `src/`) names: `crate::m`, the names of a
/// `crate::{m, n::…}` group, and `super::…::m` where the `super`s climb to the crate root.
fn named_modules(path: &[String], source: &str) -> BTreeSet<String> {
    let code = code(source);
    let mut named = BTreeSet::new();
    let word = |text: &str| -> String { text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    for (at, _) in code.match_indices("crate::") {
        let after = &code[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            named.extend(group.split(',').map(|item| word(item.trim())).filter(|name| !name.is_empty()));
        } else {
            named.insert(word(after));
        }
    }
    // A file's module path: `a/b/c.rs` is a::b::c, `a/b/mod.rs` is a::b; each `super` climbs one.
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("super::") {
            continue;
        }
        let mut rest = &code[at..];
        let mut depth = path.len();
        while let Some(next) = rest.strip_prefix("super::") {
            depth = depth.saturating_sub(1);
            rest = next;
        }
        if depth == 0 {
            named.insert(word(rest));
        }
    }
    named
}

/// Every `.rs` file under `dir`, as its module path (relative to `src/`) and its text.
fn sources(dir: &Path, prefix: &[String], found: &mut Vec<(Vec<String>, String)>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default().to_owned();
        if path.is_dir() {
            let mut inner = prefix.to_vec();
            inner.push(name);
            sources(&path, &inner, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            let mut module = prefix.to_vec();
            if name != "mod" {
                module.push(name);
            }
            found.push((module, std::fs::read_to_string(&path).expect("read source")));
        }
    }
}

/// What breaks the layering: a module using one of a higher layer, a module missing from the table, and cycles
/// among the modules of a layer.
fn violations(layers: &BTreeMap<String, usize>, files: &[(Vec<String>, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    let roots: BTreeSet<&str> = ["lib", "main"].into();
    let modules: BTreeSet<String> =
        files.iter().filter_map(|(path, _)| path.first().cloned()).filter(|m| !roots.contains(m.as_str())).collect();
    for module in &modules {
        if !layers.contains_key(module) {
            problems.push(format!("`{module}` is in no layer of the table"));
        }
    }
    for listed in layers.keys().filter(|listed| !modules.contains(*listed)) {
        problems.push(format!("`{listed}` is in the table but not in src/"));
    }
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (path, source) in files {
        let Some(from) = path.first().filter(|from| !roots.contains(from.as_str())) else { continue };
        for to in named_modules(path, source).into_iter().filter(|to| to != from && modules.contains(to)) {
            if let (Some(mine), Some(theirs)) = (layers.get(from), layers.get(&to)) {
                if theirs > mine {
                    problems.push(format!("{}: `{from}` (layer {mine}) uses `{to}` (layer {theirs})", path.join("/")));
                }
            }
            edges.entry(from).or_default().insert(to);
        }
    }
    problems.extend(cycles(&edges));
    problems
}

/// The cycles of the module graph, each named once by the path from its first module back to it.
fn cycles(edges: &BTreeMap<&str, BTreeSet<String>>) -> Vec<String> {
    fn visit<'a>(
        node: &'a str,
        edges: &'a BTreeMap<&str, BTreeSet<String>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        found: &mut Vec<String>,
    ) {
        if let Some(at) = stack.iter().position(|on| *on == node) {
            let mut cycle: Vec<&str> = stack[at..].to_vec();
            cycle.push(node);
            found.push(format!("cycle: {}", cycle.join(" → ")));
            return;
        }
        if !done.insert(node) {
            return;
        }
        stack.push(node);
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, stack, done, found);
        }
        stack.pop();
    }
    let (mut done, mut found) = (BTreeSet::new(), Vec::new());
    for node in edges.keys() {
        visit(node, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn imports_flow_one_way_as_the_layer_table_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("read docs/architecture.md");
    let mut files = Vec::new();
    sources(&root.join("src"), &[], &mut files);
    let problems = violations(&layers(&doc), &files);
    assert!(problems.is_empty(), "the layering of src/ is broken:\n{}", problems.join("\n"));
}

#[test]
fn the_check_sees_a_reverse_import_a_missing_module_and_a_cycle() {
    let doc = "# x\n## Layers\n| layer | modules | role |\n| --- | --- | --- |\n| 0 | `api` | types |\n\
               | 1 | `controller`, `install`, `webhook` | above |\n\n## Next\n| 9 | `nothing` | |\n";
    let layers = layers(doc);
    assert_eq!(layers.len(), 4, "{layers:?}");
    let file = |path: &[&str], text: &str| (path.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>(), text.to_owned());
    let clean = [
        file(&["api"], "// crate::install is only named in a comment\nlet s = \"//\"; use crate::api::X;"),
        file(&["install", "steps"], "use crate::{api::A, webhook::B};"),
        file(&["webhook"], "use super::api::Key;"),
        file(&["controller"], ""),
    ];
    assert_eq!(violations(&layers, &clean), Vec::<String>::new());
    let reverse = [file(&["api", "keys"], "use super::super::install::Thing;"), clean[1].clone(), clean[3].clone()];
    let found = violations(&layers, &reverse);
    assert!(found.iter().any(|p| p.contains("`api` (layer 0) uses `install` (layer 1)")), "{found:?}");
    let unlisted = [clean[0].clone(), file(&["stray"], "")];
    assert!(violations(&layers, &unlisted).iter().any(|p| p.contains("`stray` is in no layer")));
    let cycle = [file(&["install"], "use crate::webhook::B;"), file(&["webhook", "h"], "use crate::install::A;")];
    assert!(violations(&layers, &cycle).iter().any(|p| p.starts_with("cycle: ")), "a cycle within a layer");
}
