//! Java: project types (declared in other files and visible through an import, a wildcard
//! import or the same package), variables declared with them, and the member accesses on both.

use std::collections::HashMap;

use tree_sitter::Node;

use super::uses::{
    base_type_name, enclosing_scope, find_uses, text, walk, Binding, Bindings, Entity, ParsedFile, UseShapes,
};

const SHAPES: UseShapes =
    UseShapes { members: &[("field_access", "object", "field"), ("method_invocation", "object", "name")], calls: &[] };

/// Nodes that scope local variables and parameters.
const FUNCTIONS: &[&str] =
    &["method_declaration", "constructor_declaration", "compact_constructor_declaration", "lambda_expression"];

const TYPE_DECLARATIONS: &[&str] =
    &["class_declaration", "interface_declaration", "enum_declaration", "record_declaration", "annotation_type_declaration"];

/// The package and the type names one file declares.
struct Declared {
    package: String,
    types: Vec<String>,
}

fn declared(file: &ParsedFile) -> Declared {
    let mut package = String::new();
    let mut types = Vec::new();
    walk(&file.tree, |node| {
        if node.kind() == "package_declaration" {
            if let Some(name) = node.named_child(0).filter(|n| matches!(n.kind(), "scoped_identifier" | "identifier")) {
                package = text(name, file.text).to_string();
            }
        } else if TYPE_DECLARATIONS.contains(&node.kind()) {
            if let Some(name) = node.child_by_field_name("name") {
                types.push(text(name, file.text).to_string());
            }
        }
    });
    Declared { package, types }
}

/// Cross-file entities of every file, in file order.
pub fn find_entities(files: &[ParsedFile]) -> Vec<Vec<Entity>> {
    let declared: Vec<Declared> = files.iter().map(declared).collect();
    let mut by_package: HashMap<&str, Vec<(usize, &str)>> = HashMap::new();
    for (index, file) in declared.iter().enumerate() {
        for name in &file.types {
            by_package.entry(file.package.as_str()).or_default().push((index, name));
        }
    }
    files
        .iter()
        .enumerate()
        .map(|(index, file)| {
            let mut bindings = Bindings::default();
            let own = &declared[index];
            let bind_package = |bindings: &mut Bindings, package: &str| {
                for (other, name) in by_package.get(package).into_iter().flatten() {
                    if *other != index {
                        bindings.bind(name, Binding::Type);
                    }
                }
            };
            bind_package(&mut bindings, &own.package);
            walk(&file.tree, |node| {
                if node.kind() != "import_declaration" {
                    return;
                }
                let Some(path) = node.named_child(0).filter(|n| matches!(n.kind(), "scoped_identifier" | "identifier"))
                else {
                    return;
                };
                let path = text(path, file.text);
                let mut cursor = node.walk();
                if node.children(&mut cursor).any(|child| child.kind() == "asterisk") {
                    bind_package(&mut bindings, path);
                } else if let Some((package, name)) = path.rsplit_once('.') {
                    // `import p.T` or a nested `import p.Outer.T`.
                    let provided = by_package.get(package).into_iter().flatten().any(|(o, n)| *n == name && *o != index)
                        || package.rsplit_once('.').is_some_and(|(outer_package, _)| {
                            by_package.get(outer_package).into_iter().flatten().any(|(o, _)| *o != index)
                                && declared.iter().enumerate().any(|(o, d)| o != index && d.types.iter().any(|t| t == name))
                        });
                    if provided {
                        bindings.bind(name, Binding::Type);
                    }
                }
            });
            for name in &own.types {
                bindings.unbind(name);
            }
            bind_instances(file, &mut bindings);
            find_uses(&file.tree, file.text, &bindings, &SHAPES)
        })
        .collect()
}

/// Binds locals, fields (also as `this.x`), parameters and loop variables declared with a
/// project type.
fn bind_instances(file: &ParsedFile, bindings: &mut Bindings) {
    let source = file.text;
    let is_project_type = |bindings: &Bindings, node: Option<Node>| {
        node.is_some_and(|t| bindings.get(base_type_name(text(t, source))) == Some(Binding::Type))
    };
    let mut found: Vec<(String, Option<usize>, bool)> = Vec::new();
    walk(&file.tree, |node| match node.kind() {
        "local_variable_declaration" | "field_declaration" => {
            if !is_project_type(bindings, node.child_by_field_name("type")) {
                return;
            }
            let field = node.kind() == "field_declaration";
            let mut cursor = node.walk();
            for declarator in node.children_by_field_name("declarator", &mut cursor) {
                if let Some(name) = declarator.child_by_field_name("name") {
                    let scope = if field { None } else { enclosing_scope(node, FUNCTIONS) };
                    found.push((text(name, source).to_string(), scope, field));
                }
            }
        }
        "formal_parameter" | "enhanced_for_statement" | "catch_formal_parameter"
            if is_project_type(bindings, node.child_by_field_name("type")) =>
        {
            if let Some(name) = node.child_by_field_name("name") {
                found.push((text(name, source).to_string(), enclosing_scope(node, FUNCTIONS), false));
            }
        }
        _ => {}
    });
    for (name, scope, field) in found {
        if field {
            bindings.bind_instance(&format!("this.{name}"), None);
        }
        bindings.bind_instance(&name, scope);
    }
}
