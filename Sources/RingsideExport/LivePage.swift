/// The live page `/` serves: HTML, CSS and JavaScript written here (LivePage.html, embedded in the
/// binary at build time), with no external assets, so it works offline. It polls `/latest` every
/// second and seeds its charts from `/api/history`.
package enum LivePage {
    package static let contentType = "text/html; charset=utf-8"
    package static let bytes: [UInt8] = Array(PackageResources.LivePage_html)
}
