import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.Arrays;
import org.deidentifier.arx.*;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.*;
import org.deidentifier.arx.metric.Metric;

/**
 * Times ARX (the prebuilt library in ../shared/tools/arx) on ARX's JUnit TestAnonymizationTCloseness case 0 with a
 * given suppression limit: Adult, every attribute but occupation a QI, occupation sensitive with
 * EqualDistanceTCloseness(0.2), KAnonymity(5), DM* (createDiscernabilityMetric(true)); prints the fastest anonymize()
 * of N runs after 2 warm-ups, the
 * optimum, its loss and the checked nodes (issue 17.2, docs/benchmarks.md; bench/bench_budget.py --tcloseness is our
 * side). Bench only, never a test dependency. From the worktree root:
 *   javac -cp '../shared/tools/arx/lib/*' -d /tmp/arxt bench/ArxTCloseness.java
 *   java -cp '../shared/tools/arx/lib/*:/tmp/arxt' ArxTCloseness ../shared/data/adult 0.04 3
 */
public class ArxTCloseness {
    public static void main(String[] args) throws Exception {
        String dir = args[0]; double supp = Double.parseDouble(args[1]); int runs = Integer.parseInt(args[2]);
        long best = Long.MAX_VALUE; ARXResult result = null;
        for (int r = 0; r < runs + 2; r++) {
            Data data = Data.create(Paths.get(dir, "adult.csv").toString(), StandardCharsets.UTF_8, ';');
            DataHandle h = data.getHandle();
            for (int c = 0; c < h.getNumColumns(); c++) {
                String a = h.getAttributeName(c);
                if (a.equals("occupation")) {
                    data.getDefinition().setAttributeType(a, AttributeType.SENSITIVE_ATTRIBUTE);
                } else {
                    String file = Paths.get(dir, "adult_hierarchy_" + a + ".csv").toString();
                    data.getDefinition().setAttributeType(a, Hierarchy.create(file, StandardCharsets.UTF_8, ';'));
                }
            }
            ARXConfiguration config = ARXConfiguration.create();
            config.addPrivacyModel(new KAnonymity(5));
            config.addPrivacyModel(new EqualDistanceTCloseness("occupation", 0.2));
            config.setSuppressionLimit(supp);
            config.setQualityModel(Metric.createDiscernabilityMetric(true));
            long t = System.nanoTime();
            result = new ARXAnonymizer().anonymize(data, config);
            long dt = System.nanoTime() - t;
            if (r >= 2) best = Math.min(best, dt);
        }
        ARXNode opt = result.getGlobalOptimum();
        int checked = 0;
        for (ARXNode[] level : result.getLattice().getLevels()) for (ARXNode n : level) if (n.isChecked()) checked++;
        System.out.println("supp=" + supp + " anonymize_ms_min=" + best / 1e6 + " optimum="
                           + Arrays.toString(opt.getTransformation()) + " loss=" + opt.getHighestScore()
                           + " checked=" + checked);
    }
}
