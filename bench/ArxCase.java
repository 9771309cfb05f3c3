import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.Arrays;

import org.deidentifier.arx.*;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.*;
import org.deidentifier.arx.metric.Metric;

/**
 * Runs ARX (the prebuilt library in ../shared/tools/arx) on ARX's JUnit TestAnonymizationTCloseness cases 2 and 3:
 * Adult, every attribute but occupation a QI, occupation sensitive with HierarchicalDistanceTCloseness(0.2, its
 * hierarchy), KAnonymity(k), 4 % suppression, monotone non-uniform entropy; prints ARX's optimum and its loss, and
 * ARX's loss at the transformation the JUnit test expects (tests/test_arx_objectives.py, docs/search.md).
 * Bench only, never a test dependency. From the worktree root:
 *   javac -cp '../shared/tools/arx/lib/*' -d /tmp/arxcase bench/ArxCase.java
 *   java -cp '../shared/tools/arx/lib/*:/tmp/arxcase' ArxCase ../shared/data/adult 5 100
 */
public class ArxCase {
    public static void main(String[] args) throws Exception {
        String dir = args[0];
        for (int i = 1; i < args.length; i++) run(dir, Integer.parseInt(args[i]), new int[] {1, 4, 1, 0, 3, 1, 2, 1});
    }

    static void run(String dir, int k, int[] probe) throws Exception {
        Data data = Data.create(Paths.get(dir, "adult.csv").toString(), StandardCharsets.UTF_8, ';');
        DataHandle h = data.getHandle();
        Hierarchy occ = null;
        for (int c = 0; c < h.getNumColumns(); c++) {
            String a = h.getAttributeName(c);
            Hierarchy hier = Hierarchy.create(Paths.get(dir, "adult_hierarchy_" + a + ".csv").toString(),
                                              StandardCharsets.UTF_8, ';');
            if (a.equals("occupation")) {
                occ = hier;
                data.getDefinition().setAttributeType(a, AttributeType.SENSITIVE_ATTRIBUTE);
            } else {
                data.getDefinition().setAttributeType(a, hier);
            }
        }
        ARXConfiguration config = ARXConfiguration.create();
        config.addPrivacyModel(new KAnonymity(k));
        config.addPrivacyModel(new HierarchicalDistanceTCloseness("occupation", 0.2, occ));
        config.setSuppressionLimit(0.04);
        config.setQualityModel(Metric.createEntropyMetric(true));
        ARXResult result = new ARXAnonymizer().anonymize(data, config);
        ARXNode opt = result.getGlobalOptimum();
        System.out.println("k=" + k + " QIs " + Arrays.toString(opt.getQuasiIdentifyingAttributes()));
        report("optimum", result, opt);
        for (ARXNode[] level : result.getLattice().getLevels())
            for (ARXNode n : level)
                if (Arrays.equals(n.getTransformation(), probe)) report("probe", result, n);
    }

    static void report(String what, ARXResult result, ARXNode n) {
        DataHandle out = result.getOutput(n, false);     // also computes the node's loss if it was not checked
        int supp = out.getStatistics().getEquivalenceClassStatistics().getNumberOfSuppressedRecords();
        int classes = out.getStatistics().getEquivalenceClassStatistics().getNumberOfEquivalenceClasses();
        System.out.println("  " + what + " " + Arrays.toString(n.getTransformation()) + " anonymous=" + n.getAnonymity()
                           + " highest=" + n.getHighestScore() + " lowest=" + n.getLowestScore()
                           + " suppressed=" + supp + " classes=" + classes);
        out.release();
    }
}
