/* The Chinese book's search: a query split into the words its index holds.
 * Chinese has no spaces between words. Sphinx indexed each page with jieba's words of two
 * characters or more; a query is split the same way, at each place the longest word of the index
 * that starts there (a character that starts none is left out, as the index left it out). Other
 * text splits where the default splitter of searchtools.js would split it. */
function splitQuery(query) {
  const index = Search._index || { terms: {}, titleterms: {} };
  const known = (word) => Object.hasOwn(index.terms, word) || Object.hasOwn(index.titleterms, word);
  const words = [];
  for (const run of query.match(/\p{Script=Han}+|[\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu) || []) {
    if (!/\p{Script=Han}/u.test(run)) {
      words.push(run);
      continue;
    }
    for (let start = 0, end; start < run.length; start = end) {
      end = Math.min(run.length, start + 8);
      while (end > start + 1 && !known(run.slice(start, end))) end--;
      if (end > start + 1) words.push(run.slice(start, end));
    }
  }
  return words;
}
