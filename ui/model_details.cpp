#include "model_details.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QObject>
#include <QStringList>

#include "format.h"

namespace mumoe::ui {
namespace {

QString htmlRow(const QString& key, const QString& value) {
  return QStringLiteral("<tr><td style='color:#666;padding-right:12px'>%1</td><td>%2</td></tr>")
      .arg(key.toHtmlEscaped(), value.toHtmlEscaped());
}

}  // namespace

QString layerDetailsHtml(const model::ModelSummary& summary, size_t layerIndex) {
  const auto& layer = summary.layers.at(layerIndex);
  const auto& c = layer.config;

  QString html = QStringLiteral("<h3>Layer %1</h3><table>").arg(QString::fromStdString(layer.name).toHtmlEscaped());
  if (layer.router) {
    html += htmlRow(QObject::tr("Router"), QString::fromStdString(layer.router_description()));
    html += htmlRow(QObject::tr("Expert coefficient"),
                    layer.router->router == nn::RouterKind::SoftMoE
                        ? QObject::tr("the slot weights of the sample for the expert's slots")
                        : QObject::tr("the combine weight of the sample for the expert (0 where it was not taken)"));
    html += htmlRow(QObject::tr("Parameters"), groupedNumber(layer.total_parameters()));
  } else {
  html += htmlRow(QObject::tr("Variant"), QString::fromStdString(c.variant_name()) +
                                     (c.is_block() ? QObject::tr(" two-layer block (shared coefficients)") : QObject::tr(" layer")));
  html += htmlRow(QObject::tr("Expert modes"), QStringLiteral("%1 (hierarchy %2)").arg(joinDims(c.expert_dims)).arg(c.hierarchy()));
  html += htmlRow(QObject::tr("Total experts"), groupedNumber(c.total_experts()));
  html += htmlRow(QObject::tr("Ranks"), rankText(c));
  html += htmlRow(QObject::tr("Shape"), shapeText(c) + (c.use_bias ? QObject::tr(" (per-expert bias)") : QObject::tr(" (no bias)")));
  html += htmlRow(QObject::tr("Gating"), gatingText(c));
  html += htmlRow(QObject::tr("Tensor prefix"), layer.prefix.empty() ? QObject::tr("(top level)") : QString::fromStdString(layer.prefix));
  html += htmlRow(QObject::tr("Parameters"), QObject::tr("%1 (factors %2, gating %3%4)")
                                        .arg(groupedNumber(layer.parameters.total()), groupedNumber(layer.parameters.factors),
                                             groupedNumber(layer.parameters.gating),
                                             layer.parameters.input_norm ? QObject::tr(", input norm %1").arg(groupedNumber(layer.parameters.input_norm))
                                                                         : QString()));
  }
  html += QStringLiteral("</table><h3>%1</h3><table>").arg(QObject::tr("Model file"));
  html += htmlRow(QObject::tr("File"), QString::fromStdString(summary.path));
  html += htmlRow(QObject::tr("Size"), QObject::tr("%1 bytes").arg(groupedNumber(static_cast<int64_t>(summary.file_bytes))));
  html += htmlRow(QObject::tr("Format"), QString::fromStdString(model::format_description(summary)).toHtmlEscaped());
  html += htmlRow(QObject::tr("Architecture"), QString::fromStdString(summary.architecture));
  if (!summary.backbone.empty())
    html += htmlRow(QObject::tr("Backbone"), QString::fromStdString(summary.backbone) +
                                        (summary.backbone_preset.empty()
                                             ? QString()
                                             : QObject::tr(" — preset %1").arg(QString::fromStdString(summary.backbone_preset))));
  for (const auto& note : summary.notes)
    html += QStringLiteral("<tr><td style='color:#a15c00;padding-right:12px'>%1</td><td style='color:#a15c00'>%2</td></tr>")
                .arg(QObject::tr("Note"), QString::fromStdString(note).toHtmlEscaped());
  const auto provenance = QJsonDocument::fromJson(QByteArray::fromStdString(summary.provenance_json)).object();
  const auto test = provenance.value(QStringLiteral("test_metrics")).toObject();
  if (test.contains(QStringLiteral("accuracy")))
    html += htmlRow(QObject::tr("Test accuracy"), QObject::tr("%1 % on %2 (%3 samples)")
                                             .arg(test.value(QStringLiteral("accuracy")).toDouble() * 100, 0, 'f', 2)
                                             .arg(test.value(QStringLiteral("data")).toString())
                                             .arg(test.value(QStringLiteral("samples")).toInt()));
  auto list = [](const std::vector<std::string>& names) {
    QStringList out;
    for (const auto& n : names) out << QString::fromStdString(n);
    return out.isEmpty() ? QObject::tr("—") : out.join(QStringLiteral(", "));
  };
  html += htmlRow(QObject::tr("Labels"), list(summary.label_names));
  html += htmlRow(QObject::tr("Attributes"), list(summary.attribute_names));
  html += QStringLiteral("</table><h3>%1</h3><pre>%2</pre>")
              .arg(QObject::tr("Provenance"),
                   QString::fromUtf8(QJsonDocument::fromJson(QByteArray::fromStdString(summary.provenance_json))
                                         .toJson(QJsonDocument::Indented))
                       .toHtmlEscaped());
  return html;
}

}  // namespace mumoe::ui
