//! C#: project types (declared in other files, visible through a `using` of their namespace or
//! an enclosing namespace), variables, fields, properties and parameters declared with them, and
//! the member accesses on both.

use std::collections::HashMap;

use tree_sitter::Node;

use super::uses::{
    base_type_name, enclosing_scope, find_uses, text, walk, Binding, Bindings, Entity, ParsedFile, UseShapes,
};

const SHAPES: UseShapes = UseShapes { members: &[("member_access_expression", "expression", "name")], calls: &[] };

/// Nodes that scope local variables and parameters.
const FUNCTIONS: &[&str] = &[
    "method_declaration",
    "constructor_declaration",
    "local_function_statement",
    "lambda_expression",
    "accessor_declaration",
    "operator_declaration",
    "anonymous_method_expression",
];

const TYPE_DECLARATIONS: &[&str] = &[
    "class_declaration",
    "struct_declaration",
    "interface_declaration",
    "enum_declaration",
    "record_declaration",
    "delegate_declaration",
];

/// The namespace a node sits in (`A.B` for `namespace A { namespace B { .. } }`).
fn namespace_of(node: Node, source: &str, file_scoped: &str) -> String {
    let mut parts = Vec::new();
    let mut current = node.parent();
    while let Some(parent) = current {
        if parent.kind() == "namespace_declaration" {
            if let Some(name) = parent.child_by_field_name("name") {
                parts.push(text(name, source).to_string());
            }
        }
        current = parent.parent();
    }
    if !file_scoped.is_empty() {
        parts.push(file_scoped.to_string());
    }
    parts.reverse();
    parts.join(".")
}

/// `(namespace, type name)` of every type a file declares, plus its namespaces.
fn declared(file: &ParsedFile) -> (Vec<(String, String)>, Vec<String>) {
    let mut file_scoped = String::new();
    walk(&file.tree, |node| {
        if node.kind() == "file_scoped_namespace_declaration" {
            if let Some(name) = node.child_by_field_name("name") {
                file_scoped = text(name, file.text).to_string();
            }
        }
    });
    let mut types = Vec::new();
    let mut namespaces = vec![file_scoped.clone()];
    walk(&file.tree, |node| {
        if TYPE_DECLARATIONS.contains(&node.kind()) {
            if let Some(name) = node.child_by_field_name("name") {
                types.push((namespace_of(node, file.text, &file_scoped), text(name, file.text).to_string()));
            }
        } else if node.kind() == "namespace_declaration" {
            let mut full = namespace_of(node, file.text, &file_scoped);
            if let Some(name) = node.child_by_field_name("name") {
                if !full.is_empty() {
                    full.push('.');
                }
                full.push_str(text(name, file.text));
            }
            namespaces.push(full);
        }
    });
    (types, namespaces)
}

/// Cross-file entities of every file, in file order.
pub fn find_entities(files: &[ParsedFile]) -> Vec<Vec<Entity>> {
    let declared: Vec<_> = files.iter().map(declared).collect();
    let mut by_namespace: HashMap<&str, Vec<(usize, &str)>> = HashMap::new();
    for (index, (types, _)) in declared.iter().enumerate() {
        for (namespace, name) in types {
            by_namespace.entry(namespace.as_str()).or_default().push((index, name));
        }
    }
    files
        .iter()
        .enumerate()
        .map(|(index, file)| {
            let mut bindings = Bindings::default();
            let bind_namespace = |bindings: &mut Bindings, namespace: &str| {
                for (other, name) in by_namespace.get(namespace).into_iter().flatten() {
                    if *other != index {
                        bindings.bind(name, Binding::Type);
                    }
                }
            };
            // The global namespace, the file's namespaces and every enclosing one.
            bind_namespace(&mut bindings, "");
            for namespace in &declared[index].1 {
                let mut prefix = namespace.as_str();
                loop {
                    bind_namespace(&mut bindings, prefix);
                    match prefix.rsplit_once('.') {
                        Some((outer, _)) => prefix = outer,
                        None => break,
                    }
                }
            }
            walk(&file.tree, |node| {
                if node.kind() != "using_directive" {
                    return;
                }
                let mut cursor = node.walk();
                if node.children(&mut cursor).any(|c| c.kind() == "static") {
                    return;
                }
                let alias = node.child_by_field_name("name");
                let mut cursor = node.walk();
                let Some(target) = node
                    .named_children(&mut cursor)
                    .filter(|c| Some(*c) != alias)
                    .find(|c| matches!(c.kind(), "qualified_name" | "identifier"))
                else {
                    return;
                };
                let target = text(target, file.text);
                match alias {
                    None => bind_namespace(&mut bindings, target),
                    Some(alias) => {
                        let (namespace, name) = target.rsplit_once('.').unwrap_or(("", target));
                        let provided =
                            by_namespace.get(namespace).into_iter().flatten().any(|(o, n)| *o != index && *n == name);
                        if provided {
                            bindings.bind(text(alias, file.text), Binding::Type);
                        }
                    }
                }
            });
            for (_, name) in &declared[index].0 {
                bindings.unbind(name);
            }
            bind_instances(file, &mut bindings);
            find_uses(&file.tree, file.text, &bindings, &SHAPES)
        })
        .collect()
}

/// Binds locals, fields and properties (also as `this.x`) and parameters declared with a project
/// type, and `var x = new T(..)` of one.
fn bind_instances(file: &ParsedFile, bindings: &mut Bindings) {
    let source = file.text;
    let is_project_type =
        |bindings: &Bindings, t: Node| bindings.get(base_type_name(text(t, source))) == Some(Binding::Type);
    let mut found: Vec<(String, Option<usize>)> = Vec::new();
    walk(&file.tree, |node| match node.kind() {
        "variable_declaration" => {
            let Some(declared_type) = node.child_by_field_name("type") else { return };
            let field = node.parent().is_some_and(|p| p.kind() == "field_declaration");
            let mut cursor = node.walk();
            for declarator in node.named_children(&mut cursor).filter(|c| c.kind() == "variable_declarator") {
                let Some(name) = declarator.child_by_field_name("name") else { continue };
                let created = || {
                    let mut inner = declarator.walk();
                    let found = declarator.named_children(&mut inner).any(|value| {
                        value.kind() == "object_creation_expression"
                            && value.child_by_field_name("type").is_some_and(|t| is_project_type(bindings, t))
                    });
                    found
                };
                if is_project_type(bindings, declared_type) || (declared_type.kind() == "implicit_type" && created()) {
                    let name = text(name, source);
                    if field {
                        found.push((format!("this.{name}"), None));
                        found.push((name.to_string(), None));
                    } else {
                        found.push((name.to_string(), enclosing_scope(node, FUNCTIONS)));
                    }
                }
            }
        }
        "parameter" | "property_declaration" => {
            let (Some(declared_type), Some(name)) = (node.child_by_field_name("type"), node.child_by_field_name("name"))
            else {
                return;
            };
            if is_project_type(bindings, declared_type) {
                let name = text(name, source);
                if node.kind() == "property_declaration" {
                    found.push((format!("this.{name}"), None));
                    found.push((name.to_string(), None));
                } else {
                    found.push((name.to_string(), enclosing_scope(node, FUNCTIONS)));
                }
            }
        }
        _ => {}
    });
    for (name, scope) in found {
        bindings.bind_instance(&name, scope);
    }
}
