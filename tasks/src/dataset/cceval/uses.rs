//! Shared pieces of the cross-file analysis: the names a file binds to other project files and
//! the walk that finds member accesses and calls on them.

use std::collections::HashMap;

use tree_sitter::{Node, Tree};

/// A parsed source file of the project.
pub struct ParsedFile<'a> {
    /// Path relative to the repository root, `/`-separated.
    pub path: &'a str,
    /// The file's text.
    pub text: &'a str,
    /// Its tree-sitter tree.
    pub tree: Tree,
}

/// A use of a name that only another file of the project defines (the cross-file entity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// The name used (a member, or an imported function or class called directly).
    pub name: String,
    /// Byte offset of the name in the file.
    pub start: usize,
}

/// What a bound name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// An imported module, class or function of the project: its members are cross-file and so
    /// is calling it.
    Imported,
    /// An imported project type used only as a receiver or a declared type (Java, C#): its
    /// static members are cross-file.
    Type,
    /// A variable, parameter or field holding an instance of a project type.
    Instance,
}

/// Names (receiver texts such as `x`, `self.x`, `this.x`, `pkg.mod`) bound to other project files:
/// file-wide ones (imports, fields) and ones local to a function (variables, parameters).
#[derive(Debug, Default)]
pub struct Bindings {
    names: HashMap<String, Binding>,
    /// Instance names per function: the ids of the function nodes that declare them.
    locals: HashMap<String, Vec<usize>>,
}

impl Bindings {
    /// Binds `name`; an import or type binding is never downgraded to an instance.
    pub fn bind(&mut self, name: &str, binding: Binding) {
        let name: String = name.split_whitespace().collect();
        if name.is_empty() {
            return;
        }
        match self.names.get(&name) {
            Some(Binding::Imported | Binding::Type) if binding == Binding::Instance => {}
            _ => {
                self.names.insert(name, binding);
            }
        }
    }

    /// Binds an instance name declared inside the function node `scope`, or file-wide when
    /// `scope` is `None` (module-level variables, fields).
    pub fn bind_instance(&mut self, name: &str, scope: Option<usize>) {
        match scope {
            None => self.bind(name, Binding::Instance),
            Some(id) => self.locals.entry(name.split_whitespace().collect()).or_default().push(id),
        }
    }

    /// What the receiver node is bound to: a file-wide binding, or an instance declared in a
    /// function that encloses it.
    pub fn resolve(&self, receiver: Node, source: &str) -> Option<Binding> {
        let name = text(receiver, source);
        if let Some(binding) = self.get(name) {
            return Some(binding);
        }
        let compact: String = name.split_whitespace().collect();
        let scopes = self.locals.get(&compact)?;
        let mut current = receiver.parent();
        while let Some(node) = current {
            if scopes.contains(&node.id()) {
                return Some(Binding::Instance);
            }
            current = node.parent();
        }
        None
    }

    /// Removes a name that the file itself defines (a local class shadowing an import).
    pub fn unbind(&mut self, name: &str) {
        self.names.remove(name);
    }

    /// What `receiver` (whitespace ignored) is bound to.
    pub fn get(&self, receiver: &str) -> Option<Binding> {
        if receiver.contains(char::is_whitespace) {
            let compact: String = receiver.split_whitespace().collect();
            self.names.get(&compact).copied()
        } else {
            self.names.get(receiver).copied()
        }
    }

    /// True when `name` is bound to anything.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

/// The id of the nearest ancestor of `node` whose kind is one of `kinds` (the function that
/// scopes a local), `None` at file level.
pub fn enclosing_scope(node: Node, kinds: &[&str]) -> Option<usize> {
    let mut current = node.parent();
    while let Some(parent) = current {
        if kinds.contains(&parent.kind()) {
            return Some(parent.id());
        }
        current = parent.parent();
    }
    None
}

/// The text of `node`.
pub fn text<'t>(node: Node, source: &'t str) -> &'t str {
    source.get(node.byte_range()).unwrap_or("")
}

/// Calls `visit` on every node of the tree, parents before children, in source order.
pub fn walk<'t>(tree: &'t Tree, mut visit: impl FnMut(Node<'t>)) {
    let mut cursor = tree.walk();
    loop {
        visit(cursor.node());
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

/// How member accesses and calls look in a grammar.
pub struct UseShapes {
    /// `(node kind, receiver field, member field)` of member accesses, e.g. Python
    /// `("attribute", "object", "attribute")`.
    pub members: &'static [(&'static str, &'static str, &'static str)],
    /// `(node kind, callee field)` of calls, e.g. `("call", "function")`.
    pub calls: &'static [(&'static str, &'static str)],
}

/// Every member access on a bound receiver and every call of an imported name, in source order.
pub fn find_uses(tree: &Tree, source: &str, bindings: &Bindings, shapes: &UseShapes) -> Vec<Entity> {
    let mut found = Vec::new();
    walk(tree, |node| {
        let kind = node.kind();
        for (member_kind, receiver_field, member_field) in shapes.members {
            if kind != *member_kind {
                continue;
            }
            let (Some(receiver), Some(member)) =
                (node.child_by_field_name(receiver_field), node.child_by_field_name(member_field))
            else {
                continue;
            };
            if bindings.resolve(receiver, source).is_some() {
                let name = member_name(member, source);
                if !name.is_empty() {
                    found.push(Entity { name: name.to_string(), start: member.start_byte() });
                }
            }
        }
        for (call_kind, callee_field) in shapes.calls {
            if kind != *call_kind {
                continue;
            }
            let Some(callee) = node.child_by_field_name(callee_field) else { continue };
            if callee.kind() == "identifier" && bindings.get(text(callee, source)) == Some(Binding::Imported) {
                found.push(Entity { name: text(callee, source).to_string(), start: callee.start_byte() });
            }
        }
    });
    found.sort_by_key(|entity| entity.start);
    found
}

/// The identifier of a member node (`foo` of `foo<T>` in generic names).
fn member_name<'t>(member: Node, source: &'t str) -> &'t str {
    let name = text(member, source);
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(name.len());
    &name[..end]
}

/// The bare type name of a type node: `Foo` of `Foo<T>`, `pkg.Foo`, `Foo[]`, `Foo?`.
pub fn base_type_name(type_text: &str) -> &str {
    let head = type_text.split(['<', '[', '?', '(', '|', '&', ' ', '\n']).next().unwrap_or("");
    head.rsplit('.').next().unwrap_or(head).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_type_names_drop_generics_arrays_and_qualifiers() {
        assert_eq!(base_type_name("Foo<Bar>"), "Foo");
        assert_eq!(base_type_name("com.x.Foo[]"), "Foo");
        assert_eq!(base_type_name("Foo?"), "Foo");
        assert_eq!(base_type_name("Foo | undefined"), "Foo");
    }

    #[test]
    fn instances_never_replace_imports() {
        let mut bindings = Bindings::default();
        bindings.bind("Foo", Binding::Imported);
        bindings.bind("Foo", Binding::Instance);
        bindings.bind("self. x", Binding::Instance);
        assert_eq!(bindings.get("Foo"), Some(Binding::Imported));
        assert_eq!(bindings.get("self.x"), Some(Binding::Instance));
        assert_eq!(bindings.get("self .x"), Some(Binding::Instance));
        assert!(!bindings.contains("y"));
    }
}
