//! Which extended attributes `--preserve=xattr` does not copy as such: those
//! the system's /etc/xattr.conf (libattr's, which GNU cp follows) names.
//! Each line is `PATTERN ACTION` (a `#` starts a comment): `skip`, never
//! copied (index data, attributes only the kernel may write, another
//! filesystem's metadata); `permissions`, copied with the permissions (the
//! mode and ACLs, by -p), not by --preserve=xattr. Without the file, the
//! POSIX ACLs are the permissions.

use std::sync::OnceLock;

/// What xattr.conf says of the attributes a pattern matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Skip,
    Permissions,
}

#[derive(Debug)]
pub struct XattrConf {
    rules: Vec<(glob::Pattern, Action)>,
}

const SYSTEM_FILE: &str = "/etc/xattr.conf";

/// Where the system has no xattr.conf: its ACLs are kept with the mode.
const WITHOUT_FILE: &str = "system.posix_acl_access permissions\n\
                            system.posix_acl_default permissions\n";

impl XattrConf {
    /// The system's rules, read once.
    pub fn system() -> &'static XattrConf {
        static CONF: OnceLock<XattrConf> = OnceLock::new();
        CONF.get_or_init(|| {
            XattrConf::parse(
                &std::fs::read_to_string(SYSTEM_FILE).unwrap_or_else(|_| WITHOUT_FILE.into()),
            )
        })
    }

    /// The rules of an xattr.conf text. A line it cannot read (an unknown
    /// action, a bad pattern) is left out: the attributes it meant are then
    /// copied, as with no rule.
    fn parse(text: &str) -> XattrConf {
        let rules = text
            .lines()
            .filter_map(|line| {
                let line = line.split('#').next().unwrap_or("");
                let mut words = line.split_whitespace();
                let pattern = glob::Pattern::new(words.next()?).ok()?;
                let action = match words.next()? {
                    "skip" => Action::Skip,
                    "permissions" => Action::Permissions,
                    _ => return None,
                };
                Some((pattern, action))
            })
            .collect();
        XattrConf { rules }
    }

    /// Whether --preserve=xattr copies the attribute `name`: not when a rule
    /// names it (skip, or permissions: those go with the mode).
    pub fn copied_as_xattr(&self, name: &str) -> bool {
        !self.rules.iter().any(|(p, _)| p.matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_attributes_are_not_copied_as_xattrs() {
        let conf = XattrConf::parse(
            "# comment\n\
             system.posix_acl_access\t\tpermissions\n\
             trusted.SGI_DMI_*\tskip\t# xfs specific\n\
             security.evm   skip\n\
             user.odd       rename\n\
             \n",
        );
        assert_eq!(conf.rules.len(), 3);
        assert_eq!(conf.rules[0].1, Action::Permissions);
        assert!(!conf.copied_as_xattr("system.posix_acl_access"));
        assert!(!conf.copied_as_xattr("trusted.SGI_DMI_x"));
        assert!(!conf.copied_as_xattr("security.evm"));
        // Not named, or named by a line it cannot read: copied.
        assert!(conf.copied_as_xattr("system.posix_acl_default"));
        assert!(conf.copied_as_xattr("user.odd"));
        assert!(conf.copied_as_xattr("user.x"));
    }

    #[test]
    fn without_the_file_the_acls_go_with_the_mode() {
        let conf = XattrConf::parse(WITHOUT_FILE);
        assert!(!conf.copied_as_xattr("system.posix_acl_access"));
        assert!(!conf.copied_as_xattr("system.posix_acl_default"));
        assert!(conf.copied_as_xattr("user.Beagle.x"));
    }
}
