// The site's one script: typeset every formula the generator marked (site/formula.h) with KaTeX, and
// highlight every code block whose language highlight.js knows. A formula KaTeX refuses is reported on
// the console, where the browser test (tests/site/check_site.py) reads it, and keeps its dollars.
document.addEventListener('DOMContentLoaded', function () {
  document.querySelectorAll('.math').forEach(function (el) {
    var display = el.classList.contains('display');
    var cut = display ? 2 : 1;
    var tex = el.textContent.slice(cut, -cut);
    try {
      katex.render(tex, el, { displayMode: display, throwOnError: true });
    } catch (e) {
      console.error('formula not typeset: ' + tex + ': ' + e.message);
    }
  });
  document.querySelectorAll('pre code[class^="language-"]').forEach(function (el) {
    var lang = el.className.slice('language-'.length);
    if (hljs.getLanguage(lang)) hljs.highlightBlock(el);
  });
});
