document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0];
    var column = Array.prototype.indexOf.call(th.parentNode.children, th);
    var ascending = th.getAttribute("data-dir") !== "asc";
    th.parentNode.querySelectorAll("th").forEach(function (h) { h.removeAttribute("data-dir"); });
    th.setAttribute("data-dir", ascending ? "asc" : "desc");
    function key(row) {
      var cell = row.cells[column];
      return cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent;
    }
    Array.prototype.slice.call(body.rows).sort(function (a, b) {
      var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
      var order = !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
      return ascending ? order : -order;
    }).forEach(function (row) { body.appendChild(row); });
  });
});
