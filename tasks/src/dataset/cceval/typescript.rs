//! TypeScript: relative imports that resolve to a file of the project, and the uses that only
//! those files can resolve (members of imported names, calls of them, and members of variables,
//! parameters and fields created from or typed with them).

use std::collections::HashSet;

use tree_sitter::Node;

use super::uses::{
    base_type_name, enclosing_scope, find_uses, text, walk, Binding, Bindings, Entity, ParsedFile, UseShapes,
};

const SHAPES: UseShapes = UseShapes {
    members: &[("member_expression", "object", "property")],
    calls: &[("call_expression", "function"), ("new_expression", "constructor")],
};

/// Nodes that scope local variables and parameters.
const FUNCTIONS: &[&str] = &[
    "function_declaration",
    "generator_function_declaration",
    "function_expression",
    "arrow_function",
    "method_definition",
];

/// Resolves a relative module specifier of `from_path` to a project file, if it names one.
pub fn resolve_import(from_path: &str, specifier: &str, files: &HashSet<&str>) -> Option<String> {
    if !specifier.starts_with('.') {
        return None;
    }
    let mut parts: Vec<&str> = from_path.split('/').collect();
    parts.pop();
    for part in specifier.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    let stem = joined.strip_suffix(".js").or_else(|| joined.strip_suffix(".jsx")).unwrap_or(&joined);
    [
        joined.clone(),
        format!("{stem}.ts"),
        format!("{stem}.tsx"),
        format!("{stem}.d.ts"),
        format!("{stem}/index.ts"),
        format!("{stem}/index.tsx"),
    ]
    .into_iter()
    .find(|candidate| files.contains(candidate.as_str()))
}

/// Cross-file entities of every file, in file order.
pub fn find_entities(files: &[ParsedFile]) -> Vec<Vec<Entity>> {
    let paths: HashSet<&str> = files.iter().map(|f| f.path).collect();
    files.iter().map(|file| file_entities(file, &paths)).collect()
}

/// The type named by a `type_annotation` node (`: Foo<T>` -> `Foo`).
fn annotated_type<'t>(annotation: Option<Node>, source: &'t str) -> &'t str {
    annotation.map_or("", |a| base_type_name(text(a, source).trim_start_matches(':').trim_start()))
}

fn file_entities(file: &ParsedFile, paths: &HashSet<&str>) -> Vec<Entity> {
    let source = file.text;
    let mut bindings = Bindings::default();
    walk(&file.tree, |node| {
        if node.kind() != "import_statement" {
            return;
        }
        let Some(specifier) = node.child_by_field_name("source") else { return };
        let specifier = text(specifier, source).trim_matches(['"', '\'', '`']);
        if resolve_import(file.path, specifier, paths).is_none() {
            return;
        }
        let mut cursor = node.walk();
        let Some(clause) = node.children(&mut cursor).find(|c| c.kind() == "import_clause") else { return };
        walk_subtree(clause, &mut |inner| match inner.kind() {
            "import_specifier" => {
                let bound = inner.child_by_field_name("alias").or_else(|| inner.child_by_field_name("name"));
                if let Some(bound) = bound {
                    bindings.bind(text(bound, source), Binding::Imported);
                }
            }
            "namespace_import" => {
                if let Some(name) = inner.named_child(0) {
                    bindings.bind(text(name, source), Binding::Imported);
                }
            }
            "identifier" if inner.parent().is_some_and(|p| p.kind() == "import_clause") => {
                bindings.bind(text(inner, source), Binding::Imported);
            }
            _ => {}
        });
    });
    for_each_local_declaration(file, |name| bindings.unbind(name));
    let mut found: Vec<(String, Option<usize>)> = Vec::new();
    let creates_project_value = |bindings: &Bindings, value: Option<Node>| {
        value.is_some_and(|v| {
            v.kind() == "new_expression"
                && v.child_by_field_name("constructor").is_some_and(|c| {
                    bindings.get(text(c, source)) == Some(Binding::Imported)
                        || c.child_by_field_name("object")
                            .is_some_and(|o| bindings.get(text(o, source)) == Some(Binding::Imported))
                })
        })
    };
    let typed = |bindings: &Bindings, annotation: Option<Node>| {
        bindings.get(annotated_type(annotation, source)) == Some(Binding::Imported)
    };
    walk(&file.tree, |node| match node.kind() {
        "variable_declarator" | "public_field_definition" => {
            let Some(name) = node.child_by_field_name("name") else { return };
            if typed(&bindings, node.child_by_field_name("type"))
                || creates_project_value(&bindings, node.child_by_field_name("value"))
            {
                let name = text(name, source);
                if node.kind() == "public_field_definition" {
                    found.push((format!("this.{name}"), None));
                    found.push((name.to_string(), None));
                } else {
                    found.push((name.to_string(), enclosing_scope(node, FUNCTIONS)));
                }
            }
        }
        "required_parameter" | "optional_parameter" => {
            let Some(pattern) = node.child_by_field_name("pattern").filter(|p| p.kind() == "identifier") else { return };
            if typed(&bindings, node.child_by_field_name("type")) {
                let name = text(pattern, source);
                let mut cursor = node.walk();
                if node.children(&mut cursor).any(|c| c.kind() == "accessibility_modifier" || c.kind() == "readonly") {
                    found.push((format!("this.{name}"), None));
                }
                found.push((name.to_string(), enclosing_scope(node, FUNCTIONS)));
            }
        }
        "assignment_expression" => {
            let Some(left) = node.child_by_field_name("left") else { return };
            if matches!(left.kind(), "identifier" | "member_expression")
                && creates_project_value(&bindings, node.child_by_field_name("right"))
            {
                let scope = if left.kind() == "identifier" { enclosing_scope(node, FUNCTIONS) } else { None };
                found.push((text(left, source).to_string(), scope));
            }
        }
        _ => {}
    });
    for (name, scope) in found {
        bindings.bind_instance(&name, scope);
    }
    find_uses(&file.tree, source, &bindings, &SHAPES)
}

/// Calls `visit` with the names of the file's top-level classes, functions and interfaces.
fn for_each_local_declaration(file: &ParsedFile, mut visit: impl FnMut(&str)) {
    let root = file.tree.root_node();
    let mut cursor = root.walk();
    for child in root.named_children(&mut cursor) {
        let declaration = if child.kind() == "export_statement" { child.child_by_field_name("declaration") } else { Some(child) };
        let Some(declaration) = declaration else { continue };
        if matches!(declaration.kind(), "class_declaration" | "function_declaration" | "interface_declaration") {
            if let Some(name) = declaration.child_by_field_name("name") {
                visit(text(name, file.text));
            }
        }
    }
}

/// [`walk`] for a subtree.
fn walk_subtree<'t>(node: Node<'t>, visit: &mut impl FnMut(Node<'t>)) {
    visit(node);
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        walk_subtree(child, visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_specifiers_resolve_to_project_files() {
        let files: HashSet<&str> = ["src/a.ts", "src/util/index.ts", "src/b.tsx"].into_iter().collect();
        assert_eq!(resolve_import("src/x/y.ts", "../a", &files).as_deref(), Some("src/a.ts"));
        assert_eq!(resolve_import("src/c.ts", "./util", &files).as_deref(), Some("src/util/index.ts"));
        assert_eq!(resolve_import("src/c.ts", "./b.js", &files).as_deref(), Some("src/b.tsx"));
        assert_eq!(resolve_import("src/c.ts", "lodash", &files), None);
        assert_eq!(resolve_import("src/c.ts", "./missing", &files), None);
    }
}
