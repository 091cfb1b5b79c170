//! GNU's abbreviations of an option's argument words, for --preserve and
//! --backup alike.

/// `word`, or the one of `words` it is an unambiguous prefix of (GNU takes
/// `--preserve=link` for links); else `word` as given, refused by its caller.
pub fn spell_out<'a>(word: &'a str, words: &[&'a str]) -> &'a str {
    if word.is_empty() || words.contains(&word) {
        return word;
    }
    let mut matches = words.iter().filter(|w| w.starts_with(word));
    match (matches.next(), matches.next()) {
        (Some(one), None) => one,
        _ => word,
    }
}
