import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.deidentifier.arx.*;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.DataGeneralizationScheme.GeneralizationDegree;
import org.deidentifier.arx.criteria.EDDifferentialPrivacy;

/**
 * ARX's SafePub (EDDifferentialPrivacy, the prebuilt library in ../shared/tools/arx) on Adult with its 9 attributes
 * as QIs at the LOW_MEDIUM generalization scheme, non-deterministic sampling, suppression limit 1: per run, the
 * records ARX suppresses (unsampled plus classes below k). Prints one JSON line. The arx-bench driver has no SafePub
 * configuration, hence this file (bench/bench_safepub_arx.py is our side). Bench only. From the worktree root:
 *   javac -cp '../shared/tools/arx/lib/*' -d /tmp/arxsp bench/ArxSafePub.java
 *   java -cp '../shared/tools/arx/lib/*:/tmp/arxsp' ArxSafePub ../shared/data/adult 20 2.0 1e-5
 */
public class ArxSafePub {
    public static void main(String[] args) throws Exception {
        String dir = args[0]; int runs = Integer.parseInt(args[1]);
        double epsilon = Double.parseDouble(args[2]), delta = Double.parseDouble(args[3]);
        List<Integer> suppressed = new ArrayList<>();
        int k = 0, records = 0; double beta = 0; String levels = "";
        for (int r = 0; r < runs; r++) {
            Data data = Data.create(Paths.get(dir, "adult.csv").toString(), StandardCharsets.UTF_8, ';');
            DataHandle h = data.getHandle();
            for (int c = 0; c < h.getNumColumns(); c++) {
                String a = h.getAttributeName(c);
                String file = Paths.get(dir, "adult_hierarchy_" + a + ".csv").toString();
                data.getDefinition().setAttributeType(a, Hierarchy.create(file, StandardCharsets.UTF_8, ';'));
            }
            EDDifferentialPrivacy model = new EDDifferentialPrivacy(epsilon, delta,
                    DataGeneralizationScheme.create(data, GeneralizationDegree.LOW_MEDIUM), false);
            ARXConfiguration config = ARXConfiguration.create();
            config.addPrivacyModel(model);
            config.setSuppressionLimit(1.0d);
            ARXResult result = new ARXAnonymizer().anonymize(data, config);
            DataHandle out = result.getOutput();
            int n = 0;
            for (int row = 0; row < out.getNumRows(); row++) {
                if (out.isOutlier(row)) n++;
            }
            suppressed.add(n);
            k = model.getK(); beta = model.getBeta(); records = out.getNumRows();
            StringBuilder sb = new StringBuilder("{");
            int[] lv = result.getGlobalOptimum().getTransformation();
            String[] qis = result.getGlobalOptimum().getQuasiIdentifyingAttributes();
            for (int i = 0; i < qis.length; i++) {
                sb.append(i == 0 ? "" : ", ").append('"').append(qis[i]).append("\": ").append(lv[i]);
            }
            levels = sb.append("}").toString();
        }
        System.out.println("{\"k\": " + k + ", \"beta\": " + beta + ", \"records\": " + records + ", \"levels\": "
                + levels + ", \"suppressed\": " + Arrays.toString(suppressed.toArray()) + "}");
    }
}
